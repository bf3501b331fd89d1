//! requires: flashattention/common.glsl
// Logit soft-capping (Gemma 2; foundry/stages/modifiers/SoftCapStage.h): cap * tanh(s / cap), as
// cap - 2 cap / (e^(2 s / cap) + 1): finite for any logit (the exponential may reach inf, which gives
// cap; tanh built as (e^2x - 1) / (e^2x + 1) would give inf / inf), and one exponential and one
// division per logit.

float soft_cap_score(float s, uint b, uint h, uint q, uint k) {
  return pc.soft_cap - 2.0 * pc.soft_cap / (exp2(s * (2.0 * LOG2E / pc.soft_cap)) + 1.0);
}
