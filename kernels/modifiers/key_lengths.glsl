// Sequences of different lengths in one batch (foundry/stages/modifiers/KeyLengthsStage.h): sequence b holds
// kv_lengths[b] keys, and its queries sit at the end of them.

uint key_lengths_kv_len(uint b) { return kv_lengths[b]; }
