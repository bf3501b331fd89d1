// The example's own modifier: each query head's logits divided by its own temperature. Foundry
// calls it at the score hook point of whichever attention kernel it builds, in natural units.
float head_temperature_score(float s, uint b, uint h, uint q, uint k) {
  return s / head_temperature[h];
}
