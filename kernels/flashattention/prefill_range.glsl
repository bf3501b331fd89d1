//! requires: flashattention/hooks_keys.glsl
// Where a prefill block's key tiles start. At the block's first visible key, or at the multiple of
// PF_BC below it where a mask's block map (made on tiles of PF_BC keys from key 0) is read: only then
// can a tile hold keys before the block's range, which its element masks must then hide.
uint pf_first_key(uvec4 keys) { return FA_TILE_VISIBLE_HOOKED ? keys.x / PF_BC * PF_BC : keys.x; }
bool pf_key_in_range(uvec4 keys, uint key) { return !FA_TILE_VISIBLE_HOOKED || key >= keys.x; }
