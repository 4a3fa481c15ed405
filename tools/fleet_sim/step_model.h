// How long a simulated worker's step takes: a fixed cost, plus one per prompt token it runs,
// plus one per sequence it samples, divided by `speed` (1 = the modelled CPU; 10 = a worker
// ten times faster, to load the router harder than CPU workers can).
//
// The defaults are TinyLlama-1.1B in f32 on 2 threads, BENCHMARKS §20 (AVX-512, 11-26): decode
// of 1 at 12.8 tok/s is a 78.1 ms step; decode of 32 at 86.1 tok/s a 371.7 ms step, so each
// sequence past the first adds (371.7 - 78.1) / 31 = 9.47 ms; prefill of 512 at 92.3 tok/s is
// 10.83 ms a prompt token.
#ifndef PAGODA_TOOLS_FLEET_SIM_STEP_MODEL_H_
#define PAGODA_TOOLS_FLEET_SIM_STEP_MODEL_H_

namespace pagoda::fleet {

struct StepModel {
  double fixed_ms = 78.1 - 9.47;  // a step's cost with nothing in it (the weights' read)
  double per_prompt_token_ms = 10.83;
  double per_decode_seq_ms = 9.47;
  double speed = 1.0;

  double Seconds(int prompt_tokens, int decode_seqs) const {
    const double ms =
        fixed_ms + per_prompt_token_ms * prompt_tokens + per_decode_seq_ms * decode_seqs;
    return ms * 1e-3 / speed;
  }
};

}  // namespace pagoda::fleet

#endif  // PAGODA_TOOLS_FLEET_SIM_STEP_MODEL_H_
