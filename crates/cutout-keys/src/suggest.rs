//! "Did you mean": the nearest name by edit distance, for unknown ids, keys and choices (in
//! configuration files, registries and the attribute macros alike).

/// Names longer than this get no suggestion: the distance costs `O(n·m)`, and a name this long
/// is not a typo of a short one.
const MAX_LEN: usize = 64;

/// The candidate nearest to `name`, if one is close enough to be a plausible typo: at most a
/// third of the name's characters (and at least one) edited. `-` and `_` count as the same
/// character and case is ignored, so `failure_ratio` and `Failure-Ratio` both find
/// `failure-ratio`. Ties go to the first candidate in iteration order.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let len = name.chars().count();
    if len > MAX_LEN {
        return None;
    }
    let limit = (len / 3).max(1);
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in candidates {
        if candidate == name || candidate.chars().count() > MAX_LEN {
            continue;
        }
        let distance = levenshtein(name, candidate);
        if distance <= limit && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

fn fold(c: char) -> char {
    if c == '_' {
        '-'
    } else {
        c.to_ascii_lowercase()
    }
}

/// Edits (insert, delete, substitute) from `a` to `b`, over characters after folding (`_` as `-`, ASCII case ignored).
pub fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().map(fold).collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().map(fold).enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            let cost = usize::from(ca != cb);
            row[j + 1] = (diagonal + cost).min(above + 1).min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(levenshtein("", ""), 0);
        assert_eq!(levenshtein("abc", ""), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("failure_ratio", "failure-ratio"), 0);
        assert_eq!(levenshtein("paymnts", "payments"), 1);
        assert_eq!(levenshtein("héllo", "hello"), 1);
    }

    #[test]
    fn nearest_respects_the_limit() {
        let names = ["payments", "ledger", "rates"];
        assert_eq!(nearest("paymnts", names), Some("payments"));
        assert_eq!(nearest("ledgr", names), Some("ledger"));
        assert_eq!(nearest("zzzzzz", names), None);
        assert_eq!(nearest("payments", names), None);
        assert_eq!(nearest(&"x".repeat(100), names), None);
    }
}
