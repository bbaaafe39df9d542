// Tests of core/status_util and rpc/grpc_status: the absl <-> gRPC status
// conversion, the code names, the early-return macros and Annotate.
#include "core/status_util.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rpc/grpc_status.h"

namespace shardmap {
namespace {

// Every canonical code with its gRPC counterpart and its name, written out
// by hand so the test does not rely on the static_cast it checks.
struct CodeRow {
  absl::StatusCode absl_code;
  grpc::StatusCode grpc_code;
  const char* name;
};

const std::vector<CodeRow>& AllCodes() {
  static const auto* rows = new std::vector<CodeRow>{
      {absl::StatusCode::kOk, grpc::StatusCode::OK, "OK"},
      {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED, "CANCELLED"},
      {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN, "UNKNOWN"},
      {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT,
       "INVALID_ARGUMENT"},
      {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED,
       "DEADLINE_EXCEEDED"},
      {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND, "NOT_FOUND"},
      {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS,
       "ALREADY_EXISTS"},
      {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED,
       "PERMISSION_DENIED"},
      {absl::StatusCode::kResourceExhausted,
       grpc::StatusCode::RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"},
      {absl::StatusCode::kFailedPrecondition,
       grpc::StatusCode::FAILED_PRECONDITION, "FAILED_PRECONDITION"},
      {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED, "ABORTED"},
      {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE,
       "OUT_OF_RANGE"},
      {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED,
       "UNIMPLEMENTED"},
      {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL, "INTERNAL"},
      {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE,
       "UNAVAILABLE"},
      {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS, "DATA_LOSS"},
      {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED,
       "UNAUTHENTICATED"},
  };
  return *rows;
}

TEST(StatusUtilTest, TableCoversSeventeenDistinctCodes) {
  ASSERT_EQ(AllCodes().size(), 17u);
  for (size_t i = 0; i < AllCodes().size(); ++i) {
    EXPECT_EQ(static_cast<int>(AllCodes()[i].absl_code), static_cast<int>(i));
  }
}

TEST(StatusUtilTest, ToGrpcKeepsCodeAndMessage) {
  for (const CodeRow& row : AllCodes()) {
    if (row.absl_code == absl::StatusCode::kOk) continue;
    SCOPED_TRACE(row.name);
    const std::string message = absl::StrCat("message for ", row.name);
    const grpc::Status g = ToGrpcStatus(absl::Status(row.absl_code, message));
    EXPECT_EQ(g.error_code(), row.grpc_code);
    EXPECT_EQ(g.error_message(), message);
    EXPECT_FALSE(g.ok());
  }
}

TEST(StatusUtilTest, FromGrpcKeepsCodeAndMessage) {
  for (const CodeRow& row : AllCodes()) {
    if (row.absl_code == absl::StatusCode::kOk) continue;
    SCOPED_TRACE(row.name);
    const std::string message = absl::StrCat("from the wire: ", row.name);
    const absl::Status a = FromGrpcStatus(grpc::Status(row.grpc_code, message));
    EXPECT_EQ(a.code(), row.absl_code);
    EXPECT_EQ(a.message(), message);
  }
}

TEST(StatusUtilTest, RoundTripBothWays) {
  for (const CodeRow& row : AllCodes()) {
    if (row.absl_code == absl::StatusCode::kOk) continue;
    SCOPED_TRACE(row.name);
    const absl::Status original(row.absl_code,
                                absl::StrCat("axis 'x' of ", row.name));
    EXPECT_EQ(FromGrpcStatus(ToGrpcStatus(original)), original);

    const grpc::Status g(row.grpc_code, "peer said no");
    const grpc::Status back = ToGrpcStatus(FromGrpcStatus(g));
    EXPECT_EQ(back.error_code(), g.error_code());
    EXPECT_EQ(back.error_message(), g.error_message());
  }
}

TEST(StatusUtilTest, OkMapsToOk) {
  const grpc::Status g = ToGrpcStatus(absl::OkStatus());
  EXPECT_TRUE(g.ok());
  EXPECT_EQ(g.error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(g.error_message(), "");

  const absl::Status a = FromGrpcStatus(grpc::Status::OK);
  EXPECT_TRUE(a.ok());
  EXPECT_EQ(a, absl::OkStatus());
  // An OK gRPC status never carries a message into absl.
  EXPECT_TRUE(FromGrpcStatus(grpc::Status(grpc::StatusCode::OK, "")).ok());
}

TEST(StatusUtilTest, OutOfRangeGrpcCodeIsUnknown) {
  // grpc::StatusCode has no fixed underlying type, so only values within
  // its enumerators' bit range (-32..31) can be formed without UB.
  for (int code : {17, 20, 31, -1, -5, -32}) {
    SCOPED_TRACE(code);
    const absl::Status a = FromGrpcStatus(
        grpc::Status(static_cast<grpc::StatusCode>(code), "bogus peer"));
    EXPECT_EQ(a.code(), absl::StatusCode::kUnknown);
    // Not just mapped on read: the stored code is UNKNOWN too.
    EXPECT_EQ(a.raw_code(), static_cast<int>(absl::StatusCode::kUnknown));
    EXPECT_EQ(a.message(), "bogus peer");
  }
}

TEST(StatusUtilTest, StatusCodeNameForEveryCode) {
  for (const CodeRow& row : AllCodes()) {
    EXPECT_EQ(StatusCodeName(row.absl_code), row.name);
  }
  EXPECT_EQ(StatusCodeName(static_cast<absl::StatusCode>(42)), "CODE_42");
}

// --- Macros ---------------------------------------------------------------

absl::Status StepsThenFail(int* steps, int fail_at) {
  for (int i = 0; i < 5; ++i) {
    SHARD_RETURN_IF_ERROR(i == fail_at
                              ? absl::DataLossError(absl::StrCat("step ", i))
                              : absl::OkStatus());
    ++*steps;
  }
  return absl::OkStatus();
}

TEST(StatusUtilTest, ReturnIfErrorReturnsFirstError) {
  int steps = 0;
  const absl::Status s = StepsThenFail(&steps, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "step 2");
  EXPECT_EQ(steps, 2);

  steps = 0;
  EXPECT_TRUE(StepsThenFail(&steps, -1).ok());
  EXPECT_EQ(steps, 5);
}

TEST(StatusUtilTest, ReturnIfErrorEvaluatesOnce) {
  int calls = 0;
  auto count = [&calls]() {
    ++calls;
    return absl::OkStatus();
  };
  auto fn = [&]() -> absl::Status {
    SHARD_RETURN_IF_ERROR(count());
    return absl::CancelledError("after");
  };
  EXPECT_EQ(fn().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 1);
}

TEST(StatusUtilTest, ReturnIfErrorWorksInUnbracedIfElse) {
  auto fn = [](bool fail) -> absl::Status {
    if (fail)
      SHARD_RETURN_IF_ERROR(absl::AbortedError("a"));
    else
      SHARD_RETURN_IF_ERROR(absl::OkStatus());
    return absl::InternalError("fell through");
  };
  EXPECT_EQ(fn(true).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(fn(false).code(), absl::StatusCode::kInternal);
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError(absl::StrCat(x, " is odd"));
  return x / 2;
}

absl::StatusOr<int> Quarter(int x, int* reached) {
  SHARD_ASSIGN_OR_RETURN(int h, Half(x));
  ++*reached;
  int q = -1;
  SHARD_ASSIGN_OR_RETURN(q, Half(h));  // assigns to an existing variable
  ++*reached;
  return q;
}

TEST(StatusUtilTest, AssignOrReturnAssignsOrPropagates) {
  int reached = 0;
  absl::StatusOr<int> q = Quarter(12, &reached);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(*q, 3);
  EXPECT_EQ(reached, 2);

  reached = 0;
  q = Quarter(6, &reached);  // 6 -> 3 -> odd
  EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(q.status().message(), "3 is odd");
  EXPECT_EQ(reached, 1);

  reached = 0;
  q = Quarter(7, &reached);
  EXPECT_EQ(q.status().message(), "7 is odd");
  EXPECT_EQ(reached, 0);
}

TEST(StatusUtilTest, AssignOrReturnMovesMoveOnlyValues) {
  auto make = [](bool ok) -> absl::StatusOr<std::unique_ptr<int>> {
    if (!ok) return absl::NotFoundError("none");
    return std::make_unique<int>(7);
  };
  auto use = [&](bool ok) -> absl::StatusOr<int> {
    SHARD_ASSIGN_OR_RETURN(std::unique_ptr<int> p, make(ok));
    return *p + 1;
  };
  absl::StatusOr<int> r = use(true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 8);
  EXPECT_EQ(use(false).status(), absl::NotFoundError("none"));
}

TEST(StatusUtilTest, AssignOrReturnIntoStatusReturningFunction) {
  auto fn = [](int x, int* out) -> absl::Status {
    SHARD_ASSIGN_OR_RETURN(*out, Half(x));
    return absl::OkStatus();
  };
  int out = 0;
  EXPECT_TRUE(fn(10, &out).ok());
  EXPECT_EQ(out, 5);
  out = 0;
  EXPECT_EQ(fn(9, &out), absl::InvalidArgumentError("9 is odd"));
  EXPECT_EQ(out, 0);
}

// --- Annotate -------------------------------------------------------------

TEST(StatusUtilTest, AnnotatePrefixesMessageAndKeepsCode) {
  const absl::Status s = Annotate(
      absl::InvalidArgumentError("mesh axis 'x' appears twice"), "mesh");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "mesh: mesh axis 'x' appears twice");

  const absl::Status twice =
      Annotate(Annotate(absl::UnavailableError("gone"), "w1"), "job 7");
  EXPECT_EQ(twice.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(twice.message(), "job 7: w1: gone");
}

TEST(StatusUtilTest, AnnotateLeavesOkAlone) {
  const absl::Status s = Annotate(absl::OkStatus(), "mesh");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

}  // namespace
}  // namespace shardmap
