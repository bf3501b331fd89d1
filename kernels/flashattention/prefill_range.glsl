//! requires: flashattention/hooks_keys.glsl
// Where a prefill block's key tiles start. At the block's first visible key, or at the multiple of
// PF_BC below it where a mask's block map (made on tiles of PF_BC keys from key 0) is read; the keys
// of that first tile before the block's range lie outside every row's span (fa_row_span), so the
// element masks hide them.
uint pf_first_key(uvec4 keys) { return FA_TILE_VISIBLE_HOOKED ? keys.x / PF_BC * PF_BC : keys.x; }
