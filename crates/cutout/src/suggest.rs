//! "Did you mean": the nearest name by edit distance, for unknown ids, keys and choices (the
//! search lives in cutout-keys, shared with the attribute macros' did-you-mean).

pub(crate) use cutout_keys::suggest::nearest;
