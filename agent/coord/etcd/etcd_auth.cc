#include "agent/coord/etcd/etcd_auth.h"

#include <sodium.h>

#include <utility>

namespace chronolink {

EtcdAuth::EtcdAuth(std::string user, std::string password) : user_(std::move(user)), password_(std::move(password)) {}

EtcdAuth::~EtcdAuth() {
  sodium_memzero(password_.data(), password_.size());
  if (token_) sodium_memzero(token_->data(), token_->size());
}

std::optional<std::string> EtcdAuth::token() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return token_;
}

void EtcdAuth::SetToken(std::string token) {
  std::lock_guard<std::mutex> lock(mutex_);
  token_ = std::move(token);
}

void EtcdAuth::Invalidate(const std::string& token) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (token_ == token) token_.reset();
}

bool IsStaleTokenMessage(std::string_view message) {
  // etcd 3.4's texts (rpctypes): ErrGRPCInvalidAuthToken, ErrGRPCUserEmpty,
  // ErrGRPCAuthOldRevision.
  for (std::string_view text : {"invalid auth token", "user name is empty", "revision of auth store is old"}) {
    if (message.find(text) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace chronolink
