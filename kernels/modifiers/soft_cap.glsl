// Logit soft-capping (Gemma 2; stages/modifiers/SoftCapStage.h): cap * tanh(s / cap). tanh is written
// out so that it stays finite for any logit (tanh built from exp(2x) overflows to inf / inf).

float soft_cap_score(float s, uint b, uint h, uint q, uint k) {
  const float x = s / pc.soft_cap;
  const float e = exp(-2.0 * abs(x));
  return pc.soft_cap * sign(x) * ((1.0 - e) / (1.0 + e));
}
