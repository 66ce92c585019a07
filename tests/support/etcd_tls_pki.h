// Certificates for tests of etcd over TLS, made with the openssl CLI in a
// directory of the test's (header-only): a CA, a server certificate for
// 127.0.0.1 and localhost, a client certificate; and a second, unrelated CA
// with a server and a client certificate of its own, for the refusals. And
// EnableEtcdAuth: etcd's root user, a chronolink user whose role may read
// and write one prefix, and auth switched on, with etcdctl.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/etcd_server.h"
#include "tests/support/run_process.h"

namespace chronolink::testing {

struct EtcdTestPki {
  std::filesystem::path dir;
  // The first CA and what it signed.
  std::string ca, server_cert, server_key, client_cert, client_key, cn_client_cert, cn_client_key;
  // The unrelated CA and what it signed.
  std::string other_ca, other_client_cert, other_client_key;

  EtcdServerTls ServerTls() const { return {ca, server_cert, server_key, true, client_cert, client_key}; }
};

namespace etcd_tls_pki_detail {

inline bool Run(const std::vector<std::string>& argv, std::string* error) {
  const ProcessResult r = RunProcess(argv, {}, std::chrono::seconds(30));
  if (r.started && !r.timed_out && r.exit_code == 0) return true;
  std::string command;
  for (const std::string& a : argv) command += a + " ";
  *error = command + "failed (exit " + std::to_string(r.exit_code) + "): " + r.err + r.out;
  return false;
}

// A CA: a self-signed P-256 certificate.
inline bool MakeCa(const std::filesystem::path& dir, const std::string& name, std::string* error) {
  return Run({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
              "-nodes", "-keyout", (dir / (name + ".key")).string(), "-out", (dir / (name + ".pem")).string(),
              "-days", "2", "-subj", "/CN=" + name},
             error);
}

// A leaf certificate signed by `ca`, with the given subject and extensions.
inline bool MakeLeaf(const std::filesystem::path& dir, const std::string& ca, const std::string& name,
                     const std::string& subject, const std::string& extensions, int serial, std::string* error) {
  const std::string ext = (dir / (name + ".ext")).string();
  std::ofstream(ext) << extensions << "\n";
  const std::string key = (dir / (name + ".key")).string(), csr = (dir / (name + ".csr")).string();
  const bool ok =
      Run({"/usr/bin/openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-keyout", key, "-out", csr, "-subj", subject},
          error) &&
      Run({"/usr/bin/openssl", "x509", "-req", "-in", csr, "-CA", (dir / (ca + ".pem")).string(), "-CAkey",
           (dir / (ca + ".key")).string(), "-set_serial", std::to_string(serial), "-days", "2", "-extfile", ext,
           "-out", (dir / (name + ".pem")).string()},
          error);
  chmod(key.c_str(), 0600);  // the agent refuses a client key others could read
  return ok;
}

}  // namespace etcd_tls_pki_detail

inline bool MakeEtcdTestPki(const std::filesystem::path& dir, EtcdTestPki* pki, std::string* error) {
  namespace d = etcd_tls_pki_detail;
  // etcd's gateway connects to etcd's own gRPC with the server certificate:
  // it needs clientAuth too.
  const std::string server_ext =
      "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
      "extendedKeyUsage=serverAuth,clientAuth";
  const std::string client_ext = "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth";
  if (!d::MakeCa(dir, "ca", error) || !d::MakeLeaf(dir, "ca", "server", "/CN=etcd", server_ext, 2, error) ||
      !d::MakeLeaf(dir, "ca", "client", "/O=chronolink-test", client_ext, 3, error) ||
      !d::MakeLeaf(dir, "ca", "cn-client", "/CN=chronolink", client_ext, 4, error) ||
      !d::MakeCa(dir, "other-ca", error) ||
      !d::MakeLeaf(dir, "other-ca", "other-client", "/O=chronolink-test", client_ext, 5, error)) {
    return false;
  }
  auto path = [&](const std::string& name) { return (dir / name).string(); };
  pki->dir = dir;
  pki->ca = path("ca.pem");
  pki->server_cert = path("server.pem");
  pki->server_key = path("server.key");
  pki->client_cert = path("client.pem");
  pki->client_key = path("client.key");
  pki->cn_client_cert = path("cn-client.pem");
  pki->cn_client_key = path("cn-client.key");
  pki->other_ca = path("other-ca.pem");
  pki->other_client_cert = path("other-client.pem");
  pki->other_client_key = path("other-client.key");
  return true;
}

// etcdctl against `url` with the PKI's client certificate; `user` as
// "name:password", empty for none.
inline bool Etcdctl(const std::string& url, const EtcdTestPki& pki, const std::string& user,
                    std::vector<std::string> args, std::string* error) {
  std::vector<std::string> argv = {"/usr/bin/etcdctl", "--endpoints=" + url, "--cacert=" + pki.ca,
                                   "--cert=" + pki.client_cert, "--key=" + pki.client_key, "--dial-timeout=5s",
                                   "--command-timeout=10s"};
  if (!user.empty()) argv.push_back("--user=" + user);
  argv.insert(argv.end(), args.begin(), args.end());
  return etcd_tls_pki_detail::Run(argv, error);
}

// Whether etcdctl is installed (package etcd-client); *why when not.
inline bool EtcdctlAvailable(std::string* why) {
  if (access("/usr/bin/etcdctl", X_OK) == 0) return true;
  *why = "no /usr/bin/etcdctl (install etcd-client: scripts/install-deps.sh)";
  return false;
}

// Root (password root_password), a user with read and write on `prefix`
// only, and auth switched on: what docs/deployment.md tells an operator.
inline bool EnableEtcdAuth(const std::string& url, const EtcdTestPki& pki, const std::string& root_password,
                           const std::string& user, const std::string& password, const std::string& prefix,
                           std::string* error) {
  return Etcdctl(url, pki, "", {"user", "add", "root:" + root_password, "--interactive=false"}, error) &&
         Etcdctl(url, pki, "", {"role", "add", user}, error) &&
         Etcdctl(url, pki, "", {"role", "grant-permission", user, "--prefix=true", "readwrite", prefix}, error) &&
         Etcdctl(url, pki, "", {"user", "add", user + ":" + password, "--interactive=false"}, error) &&
         Etcdctl(url, pki, "", {"user", "grant-role", user, user}, error) &&
         Etcdctl(url, pki, "", {"auth", "enable"}, error);
}

}  // namespace chronolink::testing
