#include "agent/coord/etcd/etcd_tls.h"

#include <arpa/inet.h>
#include <signal.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <mutex>
#include <utility>

namespace chronolink {
namespace {

// The oldest OpenSSL error queued by the failed call, in words; the queue is
// emptied (it is per thread, and a later call must not see these).
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no details";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

// An encrypted key would make OpenSSL prompt on the terminal: refuse instead.
int NoPassphrase(char*, int, int, void*) { return 0; }

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using Bio = std::unique_ptr<BIO, BioDeleter>;

Bio MemoryBio(const std::string& text) { return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size()))); }

bool IsIpLiteral(const std::string& host) {
  unsigned char address[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), address) == 1 || inet_pton(AF_INET6, host.c_str(), address) == 1;
}

// OpenSSL writes to the socket with write(2), not send(MSG_NOSIGNAL) as
// httplib does for plain sockets: a write to a connection etcd has closed
// (a refused client certificate, a restart) would raise SIGPIPE and end the
// process. Ignored once, process-wide, before the first TLS connection; the
// write then fails with EPIPE, which is reported like any broken connection.
void IgnoreSigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { signal(SIGPIPE, SIG_IGN); });
}

// Our slot in every SSL_CTX, pointing back at the client.
int ContextIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

std::string SubjectOf(X509* cert) {
  if (cert == nullptr) return "";
  char name[256];
  X509_NAME_oneline(X509_get_subject_name(cert), name, sizeof(name));
  return name;
}

}  // namespace

std::shared_ptr<const EtcdTlsCredentials> EtcdTlsCredentials::Parse(const EtcdTlsPem& pem, std::string* error) {
  ERR_clear_error();
  std::shared_ptr<EtcdTlsCredentials> out(new EtcdTlsCredentials());
  out->ca_store_ = X509_STORE_new();
  Bio ca = MemoryBio(pem.ca);
  int count = 0;
  while (X509* cert = PEM_read_bio_X509(ca.get(), nullptr, NoPassphrase, nullptr)) {
    const bool added = X509_STORE_add_cert(out->ca_store_, cert) == 1;
    X509_free(cert);
    if (!added) {
      *error = "CA certificates: " + OpenSslError();
      return nullptr;
    }
    ++count;
  }
  ERR_clear_error();  // the loop ends in a "no start line" error
  if (count == 0) {
    *error = "CA certificates: no PEM certificate (-----BEGIN CERTIFICATE-----) found";
    return nullptr;
  }
  if (pem.cert.empty() != pem.key.empty()) {
    *error = "a client certificate needs its key and a key its certificate: give both or neither";
    return nullptr;
  }
  if (pem.cert.empty()) return out;
  Bio cert = MemoryBio(pem.cert);
  out->cert_ = PEM_read_bio_X509(cert.get(), nullptr, NoPassphrase, nullptr);
  if (out->cert_ == nullptr) {
    *error = "client certificate: not a PEM certificate (" + OpenSslError() + ")";
    return nullptr;
  }
  Bio key = MemoryBio(pem.key);
  out->key_ = PEM_read_bio_PrivateKey(key.get(), nullptr, NoPassphrase, nullptr);
  if (out->key_ == nullptr) {
    *error = "client key: not an unencrypted PEM private key (" + OpenSslError() + ")";
    return nullptr;
  }
  if (X509_check_private_key(out->cert_, out->key_) != 1) {
    ERR_clear_error();
    *error = "the client key does not belong to the client certificate (" + SubjectOf(out->cert_) + ")";
    return nullptr;
  }
  return out;
}

std::string EtcdTlsCredentials::ClientCommonName() const {
  if (cert_ == nullptr) return "";
  char name[256] = {0};
  const int length = X509_NAME_get_text_by_NID(X509_get_subject_name(cert_), NID_commonName, name, sizeof(name));
  return length > 0 ? std::string(name, static_cast<size_t>(length)) : "";
}

EtcdTlsCredentials::~EtcdTlsCredentials() {
  X509_STORE_free(ca_store_);
  X509_free(cert_);
  EVP_PKEY_free(key_);
}

EtcdTlsClient::EtcdTlsClient(const std::string& host, int port,
                             std::shared_ptr<const EtcdTlsCredentials> credentials)
    : httplib::SSLClient(host, port, credentials->cert(), credentials->key()),
      credentials_(std::move(credentials)),
      host_(host) {
  IgnoreSigpipe();
  // httplib's own check would add the system's CAs (see the header).
  enable_server_certificate_verification(false);
  SSL_CTX* ctx = ssl_context();
  if (ctx == nullptr) return;  // is_valid() is false: every request fails
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  X509_STORE_up_ref(credentials_->ca_store());  // the context takes one reference
  SSL_CTX_set_cert_store(ctx, credentials_->ca_store());
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
  if (IsIpLiteral(host)) {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  }
  SSL_CTX_set_ex_data(ctx, ContextIndex(), this);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, OnVerify);
  SSL_CTX_set_info_callback(ctx, OnInfo);
}

EtcdTlsClient* EtcdTlsClient::FromSsl(const SSL* ssl) {
  return static_cast<EtcdTlsClient*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ContextIndex()));
}

int EtcdTlsClient::OnVerify(int ok, X509_STORE_CTX* store) {
  if (ok == 1) return 1;
  auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  EtcdTlsClient* self = ssl != nullptr ? FromSsl(ssl) : nullptr;
  if (self != nullptr && self->failure_.empty()) {
    const int code = X509_STORE_CTX_get_error(store);
    self->failure_ = "the server's certificate (" + SubjectOf(X509_STORE_CTX_get_current_cert(store)) +
                     ") was refused: " + X509_verify_cert_error_string(code);
    if (code == X509_V_ERR_HOSTNAME_MISMATCH || code == X509_V_ERR_IP_ADDRESS_MISMATCH) {
      self->failure_ += " (it does not name " + self->host_ + ")";
    } else {
      self->failure_ += " (is it signed by the CA in --etcd-cacert?)";
    }
  }
  return 0;  // abort the handshake
}

void EtcdTlsClient::OnInfo(const SSL* ssl, int where, int value) {
  // Alerts the server sent: how a refused client certificate shows (with
  // TLS 1.3 only after the handshake, on the first read).
  if ((where & SSL_CB_READ_ALERT) != SSL_CB_READ_ALERT) return;
  const int description = value & 0xff;
  if (description == SSL_AD_CLOSE_NOTIFY) return;  // an orderly close
  EtcdTlsClient* self = FromSsl(ssl);
  if (self == nullptr || !self->failure_.empty()) return;
  const std::string alert = SSL_alert_desc_string_long(value);
  self->failure_ = "etcd sent the TLS alert \"" + alert + "\"";
  if (description == SSL_AD_BAD_CERTIFICATE || description == SSL_AD_UNKNOWN_CA ||
      description == SSL_AD_CERTIFICATE_REQUIRED || description == SSL_AD_CERTIFICATE_UNKNOWN ||
      description == SSL_AD_UNSUPPORTED_CERTIFICATE || description == SSL_AD_CERTIFICATE_EXPIRED ||
      description == SSL_AD_CERTIFICATE_REVOKED) {
    self->failure_ += ": it did not accept this agent's client certificate (--etcd-cert: is it signed by a "
                      "CA in etcd's --trusted-ca-file, and still valid?)";
  }
}

}  // namespace chronolink
