// Translation between the step-protocol structs (common/step.h) and their wire form
// (proto/pagoda/v1/worker.proto). The only code besides the *_service files that sees the
// generated types; both the router's and the worker's service use it.
#ifndef PAGODA_PROTO_STEP_PROTO_H_
#define PAGODA_PROTO_STEP_PROTO_H_

#include <span>
#include <vector>

#include "common/executor.h"
#include "common/step.h"
#include "pagoda/v1/worker.pb.h"

namespace pagoda {

void ToProto(const StepCommand& in, v1::StepCommand* out);
StepCommand FromProto(const v1::StepCommand& in);

void ToProto(const StepResult& in, v1::StepResult* out);
StepResult FromProto(const v1::StepResult& in);

// Hello's adapters come as sent: the router checks their names, ranks and count.
void ToProto(const WorkerInfo& in, v1::Hello* out);
WorkerInfo FromProto(const v1::Hello& in);
void ToProto(const AdapterInfo& in, v1::Adapter* out);
AdapterInfo FromProto(const v1::Adapter& in);
// Hello's cached blocks (a previous router's prefix cache), as sent; the router validates them.
void ToProto(std::span<const CachedBlock> in, v1::Hello* out);
std::vector<CachedBlock> CachedBlocksFromProto(const v1::Hello& in);

}  // namespace pagoda

#endif  // PAGODA_PROTO_STEP_PROTO_H_
