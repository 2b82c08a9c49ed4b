// Coordinator wire unit tests: every message type (frame types 48..57, 64..65)
// and the spec / statuses / view codecs round-trip; every truncation, trailing
// byte, bad enum value, oversized field and unknown type is rejected as
// kInvalidArgument without crashing.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cluster/coordinator/messages.h"
#include "cluster/coordinator/spec_codec.h"

namespace pynenc_cpp::cluster {
namespace {

namespace cw = coord_wire;
using codec::StoredSpec;

// Bytes that a string-based codec could get wrong: NULs, high bytes.
const std::string kBinary("\0a\xff\0\x01\x80z\0", 8);
constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();
const Generation kBigGen{0x7fffffffu, 0xffffffffu};

AgentFamily SampleFamily(bool supported) {
  AgentFamily f;
  f.scheme = "queue";
  f.agents = {"queue://a", "queue://b", "queue://" + kBinary};
  if (supported) f.supported = std::vector<std::string>{"queue://b"};
  f.distribution = supported ? Distribution::kEvenlyByCapability : Distribution::kEvenly;
  f.drain_timeout_ms = supported ? 1 : kMaxDrainTimeoutMs;
  return f;
}

std::vector<cw::Message> Samples() {
  std::vector<cw::Message> out;
  cw::Command spawn;
  spawn.op = cw::Command::Op::kSpawn;
  spawn.request_id = kU64Max;
  spawn.label = "actor/" + kBinary;
  spawn.generation = kBigGen;
  spawn.kind = SpecKind::kAgent;
  spawn.actor_type = "worker";
  spawn.state = kBinary + std::string(70'000, '\0') + kBinary;  // larger than a u16
  spawn.drain_ms = kMaxDrainTimeoutMs;
  spawn.reason = "";
  out.push_back(spawn);
  cw::Command stop;
  stop.op = cw::Command::Op::kStop;
  stop.request_id = 7;
  stop.label = "x";
  stop.generation = {3, 1};
  stop.kind = SpecKind::kSingleton;
  stop.drain_ms = 5'000;
  stop.reason = "moving to " + kBinary;
  out.push_back(stop);

  cw::Ack ack;
  ack.request_id = 0x0102030405060708ull;
  ack.op = cw::Command::Op::kStop;
  ack.label = kBinary;
  ack.generation = {1, 0};
  ack.code = ErrorCode::kResourceExhausted;  // the largest code
  ack.message = "msg " + kBinary;
  ack.incarnation = kU64Max - 1;
  ack.report_seq = 99;
  out.push_back(ack);
  cw::Ack ok_ack;
  ok_ack.code = ErrorCode::kOk;
  out.push_back(ok_ack);

  cw::Report report;
  report.incarnation = 5;
  report.seq = kU64Max;
  report.has_quorum = true;
  report.actor_types = {"worker", "", kBinary};
  for (int i = 0; i < 300; ++i) {
    report.instances.push_back({"label-" + std::to_string(i), Generation{1u, std::uint32_t(i)},
                                static_cast<SpecKind>(i % 3), static_cast<cw::InstancePhase>(i % 4),
                                "type" + kBinary});
  }
  report.families = {SampleFamily(true), SampleFamily(false)};
  report.floors = {{"label-1", Generation{7, 3}}, {kBinary, Generation{0x7fffffffu, 0xffffffffu}}};
  report.min_term = 0xfffffffeu;
  out.push_back(report);
  out.push_back(cw::Report{});

  out.push_back(cw::ReportRequest{kU64Max});
  out.push_back(cw::ReportRequest{0});

  cw::LeaseRequest req;
  req.round = 1ull << 40;
  req.candidate = std::string(codec::kMaxIdBytes, 'c');  // exactly the limit
  req.claims = {{"a", {1, 2}, false}, {kBinary, kBigGen, true}, {"", {}, false}};
  out.push_back(req);

  cw::LeaseReply reply;
  reply.round = 3;
  reply.grantor = "g";
  reply.answers = {{"a", true}, {kBinary, false}};
  out.push_back(reply);

  cw::LeaseRelease rel;
  rel.holder = "h" + kBinary;
  rel.labels = {{"a", {1, 1}}, {kBinary, kBigGen}};
  out.push_back(rel);

  cw::Directory dir;
  dir.leader = "leader";
  dir.reign = kU64Max;
  dir.version = 12;
  dir.chunk = 2;
  dir.chunks = 3;
  for (int i = 0; i < 2'000; ++i) {
    cw::DirectoryEntry e;
    e.label = "l" + std::to_string(i);
    e.kind = static_cast<SpecKind>(i % 3);
    e.state = static_cast<SpecState>(i % 4);
    e.owner = i % 2 ? "" : "owner";
    e.owner_address = i % 2 ? "" : "10.0.0.1:7000";
    e.generation = {std::uint32_t(i), 1};
    e.reason = i % 5 ? "" : "why " + kBinary;
    e.spec = i % 7 ? "" : kBinary;
    dir.entries.push_back(std::move(e));
  }
  out.push_back(dir);
  out.push_back(cw::Directory{});

  out.push_back(cw::ClientRequest{kU64Max, cw::ClientOp::kStatuses, kBinary});
  out.push_back(cw::ClientRequest{1, cw::ClientOp::kSubmitActor, ""});
  out.push_back(cw::ClientReply{9, ErrorCode::kStaleGeneration, "stale " + kBinary, kBinary});
  out.push_back(cw::ActorMessage{kU64Max, "actor" + kBinary, true, kBinary + kBinary});
  out.push_back(cw::ActorMessage{0, "a", false, ""});
  out.push_back(cw::ActorReply{42, ErrorCode::kUnavailable, "gone", std::string(1, '\0')});
  out.push_back(cw::PathMessage{"temp/" + kBinary, std::string(70'000, '\0') + kBinary});
  out.push_back(cw::PathMessage{"", ""});
  out.push_back(cw::LabelEnvelope{"s" + kBinary, 0, kU64Max, kBinary});
  out.push_back(cw::LabelAck{"s", kU64Max, 0, cw::LabelOutcome::kRejected});
  return out;
}

// Small samples of every type, for the (quadratic) truncation tests.
std::vector<cw::Message> SmallSamples() {
  std::vector<cw::Message> out;
  out.push_back(cw::Command{
      cw::Command::Op::kSpawn, 1, "lab", {1, 2}, SpecKind::kActor, "t", kBinary, 10, "r"});
  out.push_back(cw::Ack{2, cw::Command::Op::kStop, "lab", {1, 2}, ErrorCode::kConflict, "m", 3, 4});
  cw::Report report;
  report.incarnation = 1;
  report.seq = 2;
  report.has_quorum = true;
  report.actor_types = {"t"};
  report.instances = {{"i", {1, 0}, SpecKind::kAgent, cw::InstancePhase::kActive, "t"}};
  report.families = {SampleFamily(true)};
  out.push_back(report);
  out.push_back(cw::ReportRequest{5});
  out.push_back(cw::LeaseRequest{6, "cand", {{"a", {1, 1}, true}}});
  out.push_back(cw::LeaseReply{7, "gr", {{"a", true}}});
  out.push_back(cw::LeaseRelease{"h", {{"a", {2, 0}}}});
  cw::Directory dir{"lead", 1, 2, 0, 1, {}};
  dir.entries.push_back(
      {"l", SpecKind::kSingleton, SpecState::kRunning, "o", "addr", {1, 1}, "why", kBinary});
  out.push_back(dir);
  out.push_back(cw::ClientRequest{8, cw::ClientOp::kRemove, "lab"});
  out.push_back(cw::ClientReply{9, ErrorCode::kNotFound, "m", "b"});
  out.push_back(cw::ActorMessage{10, "lab", true, kBinary});
  out.push_back(cw::ActorReply{11, ErrorCode::kOk, "", "p"});
  out.push_back(cw::PathMessage{"temp/ask-" + kBinary, kBinary});
  out.push_back(cw::LabelEnvelope{"single/" + kBinary, kU64Max, 42, kBinary});
  out.push_back(cw::LabelAck{"single", 9, kU64Max, cw::LabelOutcome::kNotHere});
  return out;
}

std::uint8_t ExpectedType(const cw::Message& m) {
  static const std::uint8_t kTypes[] = {cw::kCommand,       cw::kAck,          cw::kReport,
                                        cw::kReportRequest, cw::kLeaseRequest, cw::kLeaseReply,
                                        cw::kLeaseRelease,  cw::kDirectory,    cw::kClientRequest,
                                        cw::kClientReply,   cw::kActorMessage, cw::kActorReply,
                                        cw::kPathMessage,   cw::kLabelEnvelope, cw::kLabelAck};
  return kTypes[m.index()];
}

void ExpectRejected(std::uint8_t type, std::string_view payload, const std::string& what) {
  auto r = cw::Decode(type, payload);
  ASSERT_FALSE(r.ok()) << what;
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << what;
}

// ---- messages ----

TEST(CoordWire, TypeNumbers) {
  EXPECT_EQ(cw::kCommand, 48);
  EXPECT_EQ(cw::kClientReply, 57);
  EXPECT_EQ(cw::kActorMessage, 64);
  EXPECT_EQ(cw::kActorReply, 65);
  EXPECT_EQ(cw::kLabelAck, 68);
  for (int t = 0; t < 256; ++t) {
    EXPECT_EQ(cw::IsCoordinatorType(static_cast<std::uint8_t>(t)), t >= 48 && t <= 57) << t;
    EXPECT_EQ(cw::IsActorType(static_cast<std::uint8_t>(t)), t >= 64 && t <= 68) << t;
  }
  EXPECT_EQ(cw::InstancePhaseName(cw::InstancePhase::kAcquiring), "acquiring");
  EXPECT_EQ(cw::InstancePhaseName(cw::InstancePhase::kStopping), "stopping");
}

TEST(CoordWire, RoundTripsEveryMessageType) {
  std::vector<bool> seen(std::variant_size_v<cw::Message>, false);
  for (const auto& m : Samples()) {
    seen[m.index()] = true;
    auto [type, payload] = cw::Encode(m);
    EXPECT_EQ(type, ExpectedType(m)) << m.index();
    auto back = cw::Decode(type, payload);
    ASSERT_TRUE(back.ok()) << m.index() << ": " << back.status().message();
    EXPECT_TRUE(back.value() == m) << m.index();
    // Re-encoding gives the same bytes.
    EXPECT_EQ(cw::Encode(back.value()).second, payload) << m.index();
  }
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_TRUE(seen[i]) << "no sample of " << i;
}

TEST(CoordWire, RejectsEveryTruncation) {
  for (const auto& m : SmallSamples()) {
    auto [type, payload] = cw::Encode(m);
    for (std::size_t n = 0; n < payload.size(); ++n) {
      ExpectRejected(type, payload.substr(0, n),
                     "type " + std::to_string(type) + " prefix " + std::to_string(n));
    }
  }
}

TEST(CoordWire, RejectsTrailingBytes) {
  for (const auto& m : Samples()) {
    auto [type, payload] = cw::Encode(m);
    ExpectRejected(type, payload + std::string(1, '\0'), "type " + std::to_string(type));
    ExpectRejected(type, payload + "xyz", "type " + std::to_string(type));
  }
}

TEST(CoordWire, RejectsUnknownTypes) {
  for (int t = 0; t < 256; ++t) {
    if ((t >= 48 && t <= 57) || (t >= 64 && t <= 68)) continue;
    auto r = cw::Decode(static_cast<std::uint8_t>(t), "");
    ASSERT_FALSE(r.ok()) << t;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << t;
    EXPECT_NE(r.status().message().find("unknown"), std::string::npos) << r.status().message();
  }
  // A valid payload under a neighbouring unknown type.
  auto [type, payload] = cw::Encode(cw::ReportRequest{1});
  ExpectRejected(58, payload, "type 58");
  ExpectRejected(69, payload, "type 69");
  ExpectRejected(47, payload, "type 47");
}

// Replaces payload[at] and checks the decoder's verdict.
void ExpectByte(const cw::Message& m, std::size_t at, std::uint8_t value, bool ok,
                const std::string& what) {
  auto [type, payload] = cw::Encode(m);
  ASSERT_LT(at, payload.size()) << what;
  payload[at] = static_cast<char>(value);
  auto r = cw::Decode(type, payload);
  EXPECT_EQ(r.ok(), ok) << what << " = " << int(value)
                        << (r.ok() ? "" : ": " + r.status().message());
  if (!ok && !r.ok()) EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << what;
}

TEST(CoordWire, RejectsBadEnumsAndBools) {
  // Command: u8 op | u64 request_id | str label | u64 gen | u8 kind | ...
  const cw::Command cmd{cw::Command::Op::kSpawn, 1, "ab", {1, 1}, SpecKind::kActor, "t", "", 0, ""};
  ExpectByte(cmd, 0, 1, true, "command op");
  ExpectByte(cmd, 0, 2, false, "command op");
  ExpectByte(cmd, 0, 0xff, false, "command op");
  const std::size_t kind_at = 1 + 8 + 4 + 2 + 8;
  ExpectByte(cmd, kind_at, 2, true, "command kind");
  ExpectByte(cmd, kind_at, 3, false, "command kind");

  // Ack: u64 request_id | u8 op | str label | u64 gen | u8 code | ...
  const cw::Ack ack{1, cw::Command::Op::kSpawn, "ab", {1, 1}, ErrorCode::kOk, "", 0, 0};
  ExpectByte(ack, 8, 2, false, "ack op");
  const std::size_t code_at = 8 + 1 + 4 + 2 + 8;
  ExpectByte(ack, code_at, static_cast<std::uint8_t>(ErrorCode::kResourceExhausted), true,
             "ack code");
  ExpectByte(ack, code_at, static_cast<std::uint8_t>(ErrorCode::kResourceExhausted) + 1, false,
             "ack code");

  // Report: u64 incarnation | u64 seq | u8 has_quorum | ...
  cw::Report report;
  ExpectByte(report, 16, 1, true, "report has_quorum");
  ExpectByte(report, 16, 2, false, "report has_quorum");
  // One instance, no families: ... u8 kind | u8 phase | str actor_type("t") | u32 0.
  report.instances = {{"i", {1, 0}, SpecKind::kActor, cw::InstancePhase::kAcquiring, "t"}};
  {
    // Before the floor list (u32 0) and the min term (u32), the last fields.
    const std::size_t end = cw::Encode(report).second.size() - 8;
    const std::size_t phase_at = end - 4 - 5 - 1;
    ExpectByte(report, phase_at, 3, true, "instance phase");
    ExpectByte(report, phase_at, 4, false, "instance phase");
    ExpectByte(report, phase_at - 1, 2, true, "instance kind");
    ExpectByte(report, phase_at - 1, 3, false, "instance kind");
  }
  // One family at the end: ... u8 has_supported(0) | u8 distribution | i64 drain.
  report.instances.clear();
  report.families = {SampleFamily(false)};
  {
    // Before the floor list (u32 0) and the min term (u32), the last fields.
    const std::size_t end = cw::Encode(report).second.size() - 8;
    ExpectByte(report, end - 9, 1, true, "family distribution");
    ExpectByte(report, end - 9, 2, false, "family distribution");
    ExpectByte(report, end - 10, 2, false, "family has_supported");
  }

  // LeaseRequest: the stopping flag is the last byte.
  const cw::LeaseRequest req{1, "c", {{"a", {1, 1}, false}}};
  const std::size_t req_end = cw::Encode(req).second.size();
  ExpectByte(req, req_end - 1, 1, true, "claim stopping");
  ExpectByte(req, req_end - 1, 2, false, "claim stopping");
  const cw::LeaseReply rep{1, "g", {{"a", true}}};
  const std::size_t rep_end = cw::Encode(rep).second.size();
  ExpectByte(rep, rep_end - 1, 0, true, "answer granted");
  ExpectByte(rep, rep_end - 1, 2, false, "answer granted");

  // Directory entry: str label("l") | u8 kind | u8 state | ...
  cw::Directory dir{"L", 1, 1, 0, 1, {}};
  dir.entries.push_back({"l", SpecKind::kActor, SpecState::kPending, "", "", {}, "", ""});
  const std::size_t entry_at = 4 + 1 + 8 + 8 + 4 + 4 + 4 + 4 + 1;
  ExpectByte(dir, entry_at, 2, true, "entry kind");
  ExpectByte(dir, entry_at, 3, false, "entry kind");
  ExpectByte(dir, entry_at + 1, 3, true, "entry state");
  ExpectByte(dir, entry_at + 1, 4, false, "entry state");

  // ClientRequest: u64 id | u8 op | ...
  const cw::ClientRequest creq{1, cw::ClientOp::kView, ""};
  ExpectByte(creq, 8, 4, true, "client op");
  ExpectByte(creq, 8, 5, false, "client op");
  const cw::ClientReply crep{1, ErrorCode::kOk, "", ""};
  ExpectByte(crep, 8, 12, false, "client reply code");
  // ActorMessage: u64 id | str label("a") | u8 expects_reply | ...
  const cw::ActorMessage am{1, "a", false, ""};
  ExpectByte(am, 8 + 4 + 1, 1, true, "expects_reply");
  ExpectByte(am, 8 + 4 + 1, 2, false, "expects_reply");
  const cw::ActorReply ar{1, ErrorCode::kOk, "", ""};
  ExpectByte(ar, 8, 10, true, "actor reply code");
  ExpectByte(ar, 8, 200, false, "actor reply code");
  // LabelAck: str label("a") | u64 epoch | u64 seq | u8 outcome
  const cw::LabelAck la{"a", 1, 2, cw::LabelOutcome::kProcessed};
  ExpectByte(la, 4 + 1 + 8 + 8, 3, true, "label outcome");
  ExpectByte(la, 4 + 1 + 8 + 8, 4, false, "label outcome");
}

TEST(CoordWire, RejectsBadDirectoryChunks) {
  auto encode = [](std::uint32_t chunk, std::uint32_t chunks) {
    return cw::Encode(cw::Directory{"L", 1, 1, chunk, chunks, {}}).second;
  };
  EXPECT_TRUE(cw::Decode(cw::kDirectory, encode(0, 1)).ok());
  EXPECT_TRUE(cw::Decode(cw::kDirectory, encode(4, 5)).ok());
  ExpectRejected(cw::kDirectory, encode(0, 0), "chunks 0");
  ExpectRejected(cw::kDirectory, encode(1, 1), "chunk == chunks");
  ExpectRejected(cw::kDirectory, encode(7, 3), "chunk > chunks");
}

TEST(CoordWire, RejectsOversizedFieldsAndCounts) {
  cw::Command cmd;
  cmd.label = std::string(kMaxLabelBytes, 'l');
  EXPECT_TRUE(cw::Decode(cw::kCommand, cw::Encode(cmd).second).ok());
  cmd.label += "l";
  ExpectRejected(cw::kCommand, cw::Encode(cmd).second, "label");
  cmd.label = "l";
  cmd.actor_type = std::string(kMaxActorTypeBytes + 1, 't');
  ExpectRejected(cw::kCommand, cw::Encode(cmd).second, "actor_type");

  ExpectRejected(
      cw::kLeaseRequest,
      cw::Encode(cw::LeaseRequest{1, std::string(codec::kMaxIdBytes + 1, 'c'), {}}).second,
      "candidate");
  ExpectRejected(cw::kAck,
                 cw::Encode(cw::Ack{1,
                                    cw::Command::Op::kSpawn,
                                    "l",
                                    {},
                                    ErrorCode::kConflict,
                                    std::string(codec::kMaxReasonBytes + 1, 'm'),
                                    0,
                                    0})
                     .second,
                 "message");

  // A count above the limit, and one at the limit with nothing behind it.
  wire::ByteWriter w;
  w.U64(1);
  w.Str("c");
  w.U32(codec::kMaxListEntries + 1);
  ExpectRejected(cw::kLeaseRequest, w.data(), "count over limit");
  wire::ByteWriter w2;
  w2.U64(1);
  w2.Str("c");
  w2.U32(codec::kMaxListEntries);
  ExpectRejected(cw::kLeaseRequest, w2.data(), "count without entries");
  // A string length larger than the input.
  wire::ByteWriter w3;
  w3.U64(1);
  w3.U32(0xffffffffu);
  ExpectRejected(cw::kActorMessage, w3.data(), "huge string length");
}

TEST(CoordWire, SurvivesEverySingleByteMutation) {
  // Never crashes; whatever decodes re-encodes to the same bytes.
  for (const auto& m : SmallSamples()) {
    auto [type, payload] = cw::Encode(m);
    for (std::size_t i = 0; i < payload.size(); ++i) {
      for (int v : {0x00, 0x01, 0x02, 0x7f, 0x80, 0xff}) {
        std::string p = payload;
        p[i] = static_cast<char>(v);
        auto r = cw::Decode(type, p);
        if (r.ok()) {
          EXPECT_EQ(cw::Encode(r.value()).second, p) << int(type) << " at " << i;
        } else {
          EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
        }
      }
    }
  }
}

// ---- specs, statuses, views ----

StoredSpec FullActor() {
  StoredSpec s;
  s.kind = SpecKind::kActor;
  ActorSpec& a = s.actor;
  a.label = "storage/" + kBinary;
  a.actor_type = "storage";
  a.initial_state = kBinary + std::string(1000, '\xfe');
  a.crash_strategy = CrashStrategy::WaitForReturn(123'456'789'000);
  a.constraints.required_classes = {"worker", "edge", ""};
  a.constraints.required_metadata = {{"volume", "v1"}, {"zone", kBinary}, {"", ""}};
  a.constraints.anti_affinity_labels = {"db-1", kBinary};
  a.constraints.colocate_with = "anchor";
  a.constraints.required_node_id = std::string(32, 'f');
  a.strategy.kind = StrategyChoice::Kind::kPinned;
  a.strategy.seed = kU64Max;
  a.strategy.node = std::string(32, 'e');
  return s;
}
// Drain timeouts outside 0..kMaxDrainTimeoutMs (a day) are refused from the
// wire and from storage: deadlines computed from them could overflow.
TEST(CoordWire, RejectsOutOfRangeDrainTimeouts) {
  for (std::int64_t bad : {std::int64_t{-1}, kMaxDrainTimeoutMs + 1, kI64Min}) {
    cw::Command cmd{cw::Command::Op::kSpawn, 1, "ab", {1, 1}, SpecKind::kActor, "t", "", bad, ""};
    auto [type, payload] = cw::Encode(cmd);
    ExpectRejected(type, payload, "command drain " + std::to_string(bad));
    cw::Report report;
    report.families = {SampleFamily(false)};
    report.families[0].drain_timeout_ms = bad;
    auto [rtype, rpayload] = cw::Encode(report);
    ExpectRejected(rtype, rpayload, "family drain " + std::to_string(bad));
  }
  cw::Report report;
  report.families = {SampleFamily(false)};
  report.families[0].drain_timeout_ms = 0;
  auto [rtype, rpayload] = cw::Encode(report);
  ExpectRejected(rtype, rpayload, "family drain 0");
}

StoredSpec FullSingleton() {
  StoredSpec s;
  s.kind = SpecKind::kSingleton;
  s.singleton.label = "leader-only";
  s.singleton.actor_type = "cron";
  s.singleton.state = kBinary;
  s.singleton.anchor = SingletonAnchor::Class("gpu");
  s.singleton.drain_timeout_ms = 777;
  return s;
}

std::vector<SpecStatus> SampleStatuses() {
  return {
      {"a", SpecKind::kActor, SpecState::kRunning, "node-1", {3, 1}, ""},
      {kBinary, SpecKind::kSingleton, SpecState::kWaitingForReturn, std::nullopt, kBigGen,
       "waiting " + kBinary},
      {"agent://x", SpecKind::kAgent, SpecState::kUnplaced, "", {}, "no eligible node"},
      {"p", SpecKind::kActor, SpecState::kPending, "n", {0, 9}, "moving"},
  };
}

ClusterView SampleView() {
  ClusterView v;
  v.leader = "node-1";
  v.alive_count = 2;
  v.total_count = 4;
  const MemberState states[] = {MemberState::kAlive, MemberState::kSuspect, MemberState::kDead,
                                MemberState::kLeft};
  for (int i = 0; i < 4; ++i) {
    NodeView n;
    n.id = "node-" + std::to_string(i);
    n.address = "10.0.0." + std::to_string(i) + ":7000";
    n.incarnation = i == 3 ? kU64Max : static_cast<std::uint64_t>(i);
    n.state = states[i];
    n.alive = i < 2;
    n.node_class = i % 2 ? "edge" : "";
    n.metadata = {{"k", kBinary}, {"zone", "eu"}};
    n.actor_types = {"worker", kBinary};
    n.running = i == 0 ? std::vector<std::string>{} : std::vector<std::string>{"a", "b"};
    v.nodes.push_back(std::move(n));
  }
  return v;
}

TEST(SpecCodec, RoundTripsActorAndSingletonSpecs) {
  for (const auto& s : {FullActor(), FullSingleton(), StoredSpec{}}) {
    const std::string bytes = codec::EncodeSpec(s);
    EXPECT_EQ(static_cast<std::uint8_t>(bytes[0]), codec::kSpecFormat);
    auto back = codec::DecodeSpec(bytes);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back.value(), s);
    EXPECT_EQ(back.value().label(), s.label());
  }
  // Every strategy, crash and anchor kind.
  auto a = FullActor();
  for (auto k : {StrategyChoice::Kind::kDefault, StrategyChoice::Kind::kLeastLoaded,
                 StrategyChoice::Kind::kRandom}) {
    a.actor.strategy.kind = k;
    a.actor.crash_strategy = CrashStrategy::Abandon();
    a.actor.constraints.colocate_with.reset();
    auto back = codec::DecodeSpec(codec::EncodeSpec(a));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back.value(), a);
  }
  auto s = FullSingleton();
  for (auto anchor : {SingletonAnchor::Leader(), SingletonAnchor::Node("n1")}) {
    s.singleton.anchor = anchor;
    auto back = codec::DecodeSpec(codec::EncodeSpec(s));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back.value(), s);
  }
}

template <typename Decode>
void ExpectEveryPrefixRejected(const std::string& bytes, Decode decode, const std::string& what) {
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto r = decode(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(r.ok()) << what << " prefix " << n;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << what << " prefix " << n;
  }
  auto r = decode(bytes + std::string(1, '\0'));
  ASSERT_FALSE(r.ok()) << what << " trailing byte";
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
}

TEST(SpecCodec, RejectsAStoredDrainTimeoutOutOfRange) {
  auto s = FullSingleton();
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, kMaxDrainTimeoutMs + 1}) {
    s.singleton.drain_timeout_ms = bad;
    auto back = codec::DecodeSpec(codec::EncodeSpec(s));
    EXPECT_FALSE(back.ok()) << bad;
    s.singleton.drain_timeout_ms = bad;
    EXPECT_FALSE(ValidateSingletonSpec(s.singleton).ok()) << bad;
  }
  s.singleton.drain_timeout_ms = kMaxDrainTimeoutMs;
  EXPECT_TRUE(codec::DecodeSpec(codec::EncodeSpec(s)).ok());
  EXPECT_TRUE(ValidateSingletonSpec(s.singleton).ok());
}

TEST(SpecCodec, RejectsEveryTruncationAndTrailingByte) {
  auto a = FullActor();
  a.actor.initial_state = kBinary;  // keep the quadratic loop small
  ExpectEveryPrefixRejected(codec::EncodeSpec(a), codec::DecodeSpec, "actor");
  ExpectEveryPrefixRejected(codec::EncodeSpec(FullSingleton()), codec::DecodeSpec, "singleton");
  ExpectEveryPrefixRejected(codec::EncodeStatuses(SampleStatuses()), codec::DecodeStatuses,
                            "statuses");
  ExpectEveryPrefixRejected(codec::EncodeView(SampleView()), codec::DecodeView, "view");
}

TEST(SpecCodec, RejectsOtherFormats) {
  std::string bytes = codec::EncodeSpec(FullActor());
  for (int f : {0, 2, 255}) {
    bytes[0] = static_cast<char>(f);
    auto r = codec::DecodeSpec(bytes);
    ASSERT_FALSE(r.ok()) << f;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("format"), std::string::npos) << r.status().message();
  }
}

TEST(SpecCodec, RejectsBadEnums) {
  auto check = [](std::string bytes, std::size_t at, std::uint8_t v, bool ok,
                  const std::string& what) {
    ASSERT_LT(at, bytes.size());
    bytes[at] = static_cast<char>(v);
    auto r = codec::DecodeSpec(bytes);
    EXPECT_EQ(r.ok(), ok) << what << " = " << int(v);
  };
  // u8 format | u8 kind | ...: agents are never stored.
  const std::string actor = codec::EncodeSpec(FullActor());
  check(actor, 1, 2, false, "spec kind");
  check(actor, 1, 3, false, "spec kind");

  // Actor: str label | str type | str state | u8 crash kind | i64 wait | ...
  StoredSpec small;
  small.actor.label = "l";
  small.actor.actor_type = "t";
  const std::string sb = codec::EncodeSpec(small);
  const std::size_t crash_at = 2 + 5 + 5 + 4;
  check(sb, crash_at, 2, true, "crash kind");
  check(sb, crash_at, 3, false, "crash kind");
  // ... u32 classes | u32 metadata | u32 anti | u8 colocate? | u8 node? | u8 strategy
  const std::size_t colocate_at = crash_at + 1 + 8 + 4 + 4 + 4;
  check(sb, colocate_at, 2, false, "colocate flag");
  check(sb, colocate_at + 1, 2, false, "required_node_id flag");
  check(sb, colocate_at + 2, 3, true, "strategy kind");
  check(sb, colocate_at + 2, 4, false, "strategy kind");

  // Singleton: str label | str type | str state | u8 anchor kind | ...
  StoredSpec single;
  single.kind = SpecKind::kSingleton;
  single.singleton.label = "l";
  single.singleton.actor_type = "t";
  const std::string ss = codec::EncodeSpec(single);
  check(ss, 1, 2, false, "spec kind (a singleton body)");
  check(ss, 2 + 5 + 5 + 4, 2, true, "anchor kind");
  check(ss, 2 + 5 + 5 + 4, 3, false, "anchor kind");

  // An optional's flag other than 0/1, followed by a well-formed value.
  small.actor.constraints.colocate_with = "x";
  check(codec::EncodeSpec(small), colocate_at, 1, true, "colocate flag");
  check(codec::EncodeSpec(small), colocate_at, 2, false, "colocate flag");

  // Statuses: u32 n | str label("a") | u8 kind | u8 state | u8 has_node | ...
  const std::string st =
      codec::EncodeStatuses({{"a", SpecKind::kActor, SpecState::kPending, std::nullopt, {}, ""}});
  auto check_status = [&](std::size_t at, std::uint8_t v, bool ok) {
    std::string b = st;
    b[at] = static_cast<char>(v);
    EXPECT_EQ(codec::DecodeStatuses(b).ok(), ok) << at << " = " << int(v);
  };
  check_status(4 + 5, 2, true);
  check_status(4 + 5, 3, false);
  check_status(4 + 6, 3, true);
  check_status(4 + 6, 4, false);
  check_status(4 + 7, 2, false);
  std::string with_node =
      codec::EncodeStatuses({{"a", SpecKind::kActor, SpecState::kPending, "n", {}, ""}});
  ASSERT_EQ(with_node[4 + 7], 1);
  with_node[4 + 7] = 2;
  EXPECT_FALSE(codec::DecodeStatuses(with_node).ok());

  // View: u8 has_leader | i64 alive | i64 total | u32 n | str id("n") | str
  // address("a") | u64 incarnation | u8 state | u8 alive | ...
  ClusterView v;
  NodeView n;
  n.id = "n";
  n.address = "a";
  v.nodes = {n};
  const std::string vb = codec::EncodeView(v);
  auto check_view = [&](std::size_t at, std::uint8_t val, bool ok) {
    std::string b = vb;
    b[at] = static_cast<char>(val);
    EXPECT_EQ(codec::DecodeView(b).ok(), ok) << at << " = " << int(val);
  };
  check_view(0, 2, false);
  ClusterView led;
  led.leader = "L";
  std::string lb = codec::EncodeView(led);
  ASSERT_EQ(lb[0], 1);
  lb[0] = 2;
  EXPECT_FALSE(codec::DecodeView(lb).ok());
  const std::size_t state_at = 1 + 8 + 8 + 4 + 5 + 5 + 8;
  check_view(state_at, 3, true);
  check_view(state_at, 4, false);
  check_view(state_at + 1, 1, true);
  check_view(state_at + 1, 2, false);
}

TEST(SpecCodec, RoundTripsStatusesAndViews) {
  for (const auto& statuses : {SampleStatuses(), std::vector<SpecStatus>{}}) {
    auto back = codec::DecodeStatuses(codec::EncodeStatuses(statuses));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back.value(), statuses);
  }
  // An empty optional node and an empty node id are different.
  EXPECT_FALSE(SampleStatuses()[1].node.has_value());
  EXPECT_EQ(codec::DecodeStatuses(codec::EncodeStatuses(SampleStatuses())).value()[2].node,
            std::optional<NodeId>(""));

  for (auto view : {SampleView(), ClusterView{}}) {
    auto back = codec::DecodeView(codec::EncodeView(view));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back.value(), view);
  }
  auto v = SampleView();
  v.leader.reset();
  v.alive_count = -1;
  auto back = codec::DecodeView(codec::EncodeView(v));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value(), v);
}

TEST(SpecCodec, RejectsGarbage) {
  EXPECT_FALSE(codec::DecodeSpec("").ok());
  EXPECT_FALSE(codec::DecodeStatuses("").ok());
  EXPECT_FALSE(codec::DecodeView("").ok());
  EXPECT_FALSE(codec::DecodeStatuses(std::string("\xff\xff\xff\xff", 4)).ok());
  auto a = FullActor();
  a.actor.label = std::string(kMaxLabelBytes + 1, 'x');
  EXPECT_FALSE(codec::DecodeSpec(codec::EncodeSpec(a)).ok());
  a = FullActor();
  a.actor.initial_state = std::string(kMaxStateBytes + 1, 's');
  EXPECT_FALSE(codec::DecodeSpec(codec::EncodeSpec(a)).ok());
  a.actor.initial_state = std::string(kMaxStateBytes, 's');
  EXPECT_TRUE(codec::DecodeSpec(codec::EncodeSpec(a)).ok());
}

}  // namespace
}  // namespace pynenc_cpp::cluster
