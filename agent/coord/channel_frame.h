// The coordination channel's wire protocol without sockets
// (docs/coordination-channel.md): the hello both sides send, the per-
// connection keys derived from the cluster key and both hellos, the
// handshake MACs, and the authenticated frames that follow. Everything here
// is pure and bounded, so it is tested and fuzzed byte by byte; the socket
// side is secure_channel.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "agent/wire/probe_codec.h"

namespace chronolink {

constexpr uint32_t kChannelMagic = 0x434C4348;  // "CLCH"; differs from the probe magic
constexpr uint8_t kChannelVersion = 1;
constexpr size_t kChannelNonceSize = 32;
constexpr size_t kChannelHelloSize = 48;
constexpr size_t kChannelAuthSize = 32;        // handshake MAC
constexpr size_t kChannelFrameHeaderSize = 14; // length u32 | seq u64 | type u16
constexpr size_t kChannelFrameMacSize = 16;
constexpr size_t kChannelFrameOverhead = kChannelFrameHeaderSize + kChannelFrameMacSize;
constexpr size_t kChannelKeySize = 32;

// Frame types below this are the channel's own; users send >= 16.
constexpr uint16_t kChannelFirstUserType = 16;
constexpr uint16_t kChannelPingType = 1;

// Who opened the TCP connection; the two directions get different keys.
enum class ChannelRole : uint8_t { kInitiator, kResponder };

struct ChannelIdentity {
  uint32_t cluster_id = 0;
  uint32_t node_id = 0;
  ClusterKey key{};
};

// Every outcome of decoding; everything after kNeedMore ends the connection.
enum class ChannelResult : uint8_t {
  kOk = 0,
  kNeedMore,        // not a full hello/auth/frame yet
  kBadMagic,
  kBadVersion,
  kWrongCluster,    // hello names another cluster id
  kSelfConnect,     // hello names our own node id
  kUnexpectedPeer,  // we dialled node X and node Y answered
  kBadAuth,         // handshake MAC wrong: other key, replayed or altered hello
  kBadMac,          // frame MAC wrong: tampered, replayed or reordered bytes
  kOversize,        // frame payload above the limit (checked before buffering it)
  kBadSequence,     // authentic frame out of its place in the stream
  kTruncated,       // the stream ended inside a hello, auth or frame
  kCount
};
std::string_view ChannelResultName(ChannelResult r);

struct ChannelHello {
  uint32_t cluster_id = 0;
  uint32_t node_id = 0;
  std::array<uint8_t, kChannelNonceSize> nonce{};
};

// Exactly kChannelHelloSize bytes.
std::string EncodeChannelHello(const ChannelHello& hello);
// Checks magic and version only (cluster and node are the session's policy).
ChannelResult DecodeChannelHello(std::span<const uint8_t, kChannelHelloSize> in,
                                 ChannelHello* out);

using ChannelKey = std::array<uint8_t, kChannelKeySize>;

// The four keys of one connection, all bound to both hellos. "send"/"recv"
// are from the point of view of the side that derived them.
struct ChannelKeys {
  ChannelKey send_frame{};
  ChannelKey recv_frame{};
  ChannelKey send_auth{};
  ChannelKey recv_auth{};
};
ChannelKeys DeriveChannelKeys(const ClusterKey& cluster_key, std::string_view initiator_hello,
                              std::string_view responder_hello, ChannelRole role);

// The handshake MAC a side sends: keyed by its auth key over both hellos.
std::array<uint8_t, kChannelAuthSize> ChannelHandshakeMac(const ChannelKey& auth_key,
                                                          std::string_view initiator_hello,
                                                          std::string_view responder_hello);

// Seals frames in one direction; the sequence number counts from 0.
class FrameSealer {
 public:
  FrameSealer() = default;
  explicit FrameSealer(const ChannelKey& key) : key_(key) {}
  // Appends header, payload and MAC to *out. The caller enforces the size
  // limit; payloads above 4 GiB - 1 cannot be framed and return false.
  bool Seal(uint16_t type, std::string_view payload, std::string* out);
  uint64_t next_seq() const { return next_seq_; }

 private:
  ChannelKey key_{};
  uint64_t next_seq_ = 0;
};

struct ChannelFrame {
  uint64_t seq = 0;
  uint16_t type = 0;
  std::string_view payload;  // into the decoder's buffer: valid until its next Feed
};

// Reassembles frames of one direction from a byte stream in pieces of any
// size. An error is sticky: the stream cannot be resynchronised after one.
class FrameDecoder {
 public:
  FrameDecoder(const ChannelKey& key, size_t max_payload_bytes);
  void Feed(std::span<const uint8_t> bytes);
  // kOk with *out filled, kNeedMore, or an error (kOversize, kBadMac,
  // kBadSequence). Consumes the frame on kOk.
  ChannelResult Next(ChannelFrame* out);
  // At the end of the stream: kTruncated if a frame was cut off.
  ChannelResult Finish() const;
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  ChannelResult Fail(ChannelResult r);

  ChannelKey key_;
  size_t max_payload_;
  uint64_t expected_seq_ = 0;
  std::string buf_;
  size_t pos_ = 0;  // start of the unconsumed bytes
  ChannelResult error_ = ChannelResult::kOk;
};

struct ChannelEvent {
  enum class Kind : uint8_t { kEstablished, kFrame };
  Kind kind = Kind::kFrame;
  uint32_t peer = 0;   // the authenticated hello's node id
  ChannelFrame frame;  // kFrame only
};

// One connection's protocol, both phases: send hello(), feed received
// bytes, drain Next(). Once the peer's hello arrives Next appends our
// handshake MAC to *to_send; once the peer's MAC checks out it reports
// kEstablished, then every frame.
class ChannelSession {
 public:
  // expected_peer: for the initiator, the node it dialled.
  ChannelSession(const ChannelIdentity& self, ChannelRole role,
                 std::optional<uint32_t> expected_peer, size_t max_payload_bytes);
  ChannelSession(const ChannelSession&) = delete;
  ChannelSession& operator=(const ChannelSession&) = delete;

  const std::string& hello() const { return own_hello_; }
  void Feed(std::span<const uint8_t> bytes);
  ChannelResult Next(ChannelEvent* event, std::string* to_send);
  // At the end of the stream: kTruncated when it stopped mid-message.
  ChannelResult Finish() const;

  // Appends a sealed frame to *out; false before our keys exist (the peer's
  // hello has not arrived) or when the payload is above the limit.
  bool Seal(uint16_t type, std::string_view payload, std::string* out);

  bool established() const { return state_ == State::kEstablished; }
  std::optional<uint32_t> peer() const { return peer_; }
  ChannelRole role() const { return role_; }

 private:
  enum class State : uint8_t { kAwaitHello, kAwaitAuth, kEstablished, kFailed };
  ChannelResult CheckHello(const ChannelHello& hello) const;
  ChannelResult OnHello(std::string* to_send);
  ChannelResult OnAuth(ChannelEvent* event);
  ChannelResult Fail(ChannelResult r);

  ChannelIdentity self_;
  ChannelRole role_;
  std::optional<uint32_t> expected_peer_;
  size_t max_payload_;
  std::string own_hello_;
  std::string peer_hello_;
  std::string handshake_buf_;  // bytes until the peer's auth is checked
  std::optional<uint32_t> peer_;
  ChannelKeys keys_{};
  FrameSealer sealer_;
  std::optional<FrameDecoder> decoder_;
  State state_ = State::kAwaitHello;
  ChannelResult error_ = ChannelResult::kOk;
};

}  // namespace chronolink
