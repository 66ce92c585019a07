// TLS to etcd's client URLs (https://): the CA that must have signed the
// server's certificate, and this agent's client certificate and key, parsed
// once from PEM text and shared by every connection; and the cpp-httplib
// client that uses them.
//
// Why the PEM text and not the file paths: the agent reads its files as
// root and then drops to an unprivileged user (--user), while the watches
// open a new connection (a new httplib client) every time they reconnect.
// The files are read once, before the drop (agent/config), and nothing
// here touches the file system.
//
// Why verification is done by OpenSSL and not by cpp-httplib 0.11: httplib
// adds the system's default CA paths to the store whenever it verifies
// (SSL_CTX_set_default_verify_paths), so any publicly trusted certificate
// for the host would be accepted besides those of the etcd CA. Here the
// store holds the --etcd-cacert certificates only, OpenSSL checks the chain
// and the host name or IP address (X509_VERIFY_PARAM) during the handshake,
// and a failed check aborts it, with the reason kept for the error message.
#pragma once

#include <httplib.h>

#include <memory>
#include <string>

namespace chronolink {

// The PEM texts; cert and key both set or both empty (a server without
// --client-cert-auth needs no client certificate).
struct EtcdTlsPem {
  std::string ca, cert, key;
};

class EtcdTlsCredentials {
 public:
  // Parses the CA certificates (one or more), the client certificate and
  // its key, and checks that the key belongs to the certificate. Null, with
  // *error saying which part is wrong, otherwise.
  static std::shared_ptr<const EtcdTlsCredentials> Parse(const EtcdTlsPem& pem, std::string* error);
  ~EtcdTlsCredentials();
  EtcdTlsCredentials(const EtcdTlsCredentials&) = delete;
  EtcdTlsCredentials& operator=(const EtcdTlsCredentials&) = delete;

  X509_STORE* ca_store() const { return ca_store_; }
  X509* cert() const { return cert_; }       // null without a client certificate
  EVP_PKEY* key() const { return key_; }     // null without a client certificate
  // The client certificate's subject CommonName; empty without one. etcd
  // 3.4's gateway refuses every request from a certificate with a CN once
  // etcd's auth is on.
  std::string ClientCommonName() const;

 private:
  EtcdTlsCredentials() = default;
  X509_STORE* ca_store_ = nullptr;
  X509* cert_ = nullptr;
  EVP_PKEY* key_ = nullptr;
};

// An https client for one etcd endpoint: TLS 1.2 or later, the server's
// certificate checked against the credentials' CA and against `host` (its
// DNS name, or its IP address for a literal), the client certificate
// presented when the server asks. Used by one thread at a time (stop()
// excepted, as for any httplib client).
class EtcdTlsClient : public httplib::SSLClient {
 public:
  EtcdTlsClient(const std::string& host, int port, std::shared_ptr<const EtcdTlsCredentials> credentials);

  // What TLS said about the last exchange: why the server's certificate was
  // refused, or the alert the server sent (a client certificate it did not
  // accept). Empty when TLS reported nothing. Cleared by ClearFailure(),
  // before each request.
  const std::string& failure() const { return failure_; }
  void ClearFailure() { failure_.clear(); }

 private:
  static int OnVerify(int ok, X509_STORE_CTX* store);
  static void OnInfo(const SSL* ssl, int where, int value);
  static EtcdTlsClient* FromSsl(const SSL* ssl);

  std::shared_ptr<const EtcdTlsCredentials> credentials_;  // keeps the shared store alive
  std::string host_;
  std::string failure_;
};

}  // namespace chronolink
