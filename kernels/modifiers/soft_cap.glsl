//! requires: flashattention/common.glsl
// Logit soft-capping (Gemma 2; foundry/stages/modifiers/SoftCapStage.h): cap * tanh(s / cap), as
// cap - 2 cap / (e^(2 s / cap) + 1): finite for any logit (the exponential may reach inf, which gives
// cap; tanh built as (e^2x - 1) / (e^2x + 1) would give inf / inf), and one exponential and one
// division per logit. Near x = s / cap = 0 that form cancels, to an error of about cap * 2^-24 in the
// logit: under 4e-6 for caps up to 64 (Gemma's are 30 and 50), 6e-4 at a cap of 1e4.

float soft_cap_exp(float s) { return pc.soft_cap - 2.0 * pc.soft_cap / (exp2(s * (2.0 * LOG2E / pc.soft_cap)) + 1.0); }

float soft_cap_score(float s, uint b, uint h, uint q, uint k) { return soft_cap_exp(s); }

// Caps above 64 (SoftCapStage hooks this one instead): a logit with |x| < 1/8 takes tanh's odd series to
// x^7, exact to f32 there. A choice per call inside one function cost the cap of 50 9-11% on the H200.
float soft_cap_score_wide(float s, uint b, uint h, uint q, uint k) {
  const float x = s / pc.soft_cap, x2 = x * x;
  const float series = s * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))));
  return abs(x) < 0.125 ? series : soft_cap_exp(s);
}
