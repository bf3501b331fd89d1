// Attention sinks (gpt-oss; foundry/stages/modifiers/SinksStage.h): a learned logit per query head that joins
// the softmax denominator and nothing else.

float sink_logit(uint b, uint h) { return attn_sinks[h]; }
