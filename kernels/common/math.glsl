// Small helpers shared by every kernel.
uint ceilDiv(uint a, uint b) { return (a + b - 1u) / b; }
