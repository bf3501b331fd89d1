// A user's own modifier, read from this file by tests/steps/FusedAttentionTest.cpp: every logit is
// divided by a temperature, a push constant the modifier declares.
float user_temperature_score(float s, uint b, uint h, uint q, uint k) {
  return s / pc.user_temperature;
}
