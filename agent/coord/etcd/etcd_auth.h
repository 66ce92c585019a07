// etcd's user/password authentication (etcd's v3 auth, through the JSON
// gateway): the credentials, and the token that every request then carries
// in its Authorization header. One EtcdAuth is shared by an agent's client
// and its watchers, so that a token renewed by one serves them all.
//
// etcd's default "simple" tokens expire (--auth-token-ttl, 300 s) and die
// with the etcd process that issued them; a request with a dead token is
// answered "invalid auth token" (a watch is canceled with "permission
// denied" instead). The client then authenticates again and repeats the
// request once (EtcdClient::Call).
//
// Thread-safe.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace chronolink {

class EtcdAuth {
 public:
  EtcdAuth(std::string user, std::string password);
  ~EtcdAuth();  // wipes the password and the token
  EtcdAuth(const EtcdAuth&) = delete;
  EtcdAuth& operator=(const EtcdAuth&) = delete;

  const std::string& user() const { return user_; }
  const std::string& password() const { return password_; }

  // The token to send; nullopt when there is none yet (authenticate first),
  // empty when etcd has auth switched off (send none).
  std::optional<std::string> token() const;
  void SetToken(std::string token);
  // A request that carried `token` was refused for it: forget it, unless
  // another thread has replaced it already.
  void Invalidate(const std::string& token);

 private:
  const std::string user_;
  std::string password_;
  mutable std::mutex mutex_;
  std::optional<std::string> token_;
};

// Whether an etcd error message says the request's token is not (or no
// longer) valid, so that authenticating again may help: an expired or
// unknown token, none at all while auth is on, or one issued before the
// auth store changed.
bool IsStaleTokenMessage(std::string_view message);

}  // namespace chronolink
