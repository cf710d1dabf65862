//! The gateway's access log lines (`cutout_gateway::access`), as `tracing`'s text format
//! writes them: a timestamp, the level, the message `request`, then `key=value` fields.

use super::{Answer, Entry, duration, timestamp};

/// The fields of one access line this reader needs.
#[derive(Default)]
struct Fields<'a> {
    cluster: Option<&'a str>,
    host: Option<&'a str>,
    duration: Option<String>,
    outcome: Option<&'a str>,
    upstream: Option<&'a str>,
    request_id: bool,
}

/// ANSI colour codes (a log written to a terminal) taken out.
fn plain(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains('\u{1b}') {
        return line.into();
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// The entry of one access log line. `cluster` keeps that cluster's lines only; without it,
/// the first cluster named is kept in `seen`, and a line of another is [`Entry::Cluster`].
pub(super) fn entry(
    line: &str,
    cluster: Option<&str>,
    seen: &mut Option<String>,
) -> Result<Entry, String> {
    let line = plain(line);
    let mut tokens = line.split_whitespace().peekable();
    let Some(first) = tokens.next() else {
        return Ok(Entry::Skip);
    };
    let mut fields = Fields::default();
    let mut in_duration = false;
    for token in tokens.by_ref() {
        match token.split_once('=') {
            Some((key, value)) => {
                in_duration = key == "duration";
                match key {
                    "request_id" => fields.request_id = true,
                    "cluster" => fields.cluster = Some(value),
                    "host" => fields.host = Some(value),
                    "duration" => fields.duration = Some(value.to_owned()),
                    "outcome" => fields.outcome = Some(value),
                    "upstream" => fields.upstream = Some(value),
                    _ => {}
                }
            }
            // `2m 30s`: a duration's later parts.
            None if in_duration => {
                if let Some(d) = fields.duration.as_mut() {
                    d.push(' ');
                    d.push_str(token);
                }
            }
            None => {}
        }
    }
    // Not an access line: the gateway's other logging.
    if !fields.request_id {
        return Ok(Entry::Skip);
    }
    let (Some(outcome), Some(text)) = (fields.outcome, fields.duration.as_deref()) else {
        return Err("an access line without outcome= or duration= (truncated?)".into());
    };
    // `cluster=-` is no cluster (a request no route took, a bad request).
    match (cluster, fields.cluster.filter(|c| *c != "-")) {
        (Some(wanted), named) if named != Some(wanted) => return Ok(Entry::Skip),
        (Some(_), _) | (None, None) => {}
        (None, Some(named)) => match seen {
            None => *seen = Some(named.to_owned()),
            Some(seen) if seen == named => {}
            Some(_) => return Ok(Entry::Cluster(named.to_owned())),
        },
    }
    let answer = match outcome {
        "gave_up" => match fields.upstream {
            Some(upstream) => judged(upstream)?,
            None => None,
        },
        outcome => judged(outcome)?,
    };
    let Some(answer) = answer else {
        return Ok(Entry::Skip);
    };
    let at = timestamp(first)?;
    let duration = duration(text, false)?;
    let host = fields.host.filter(|h| *h != "-").map(str::to_owned);
    // One gateway is one caller: the log names no pod.
    Ok(Entry::Call {
        at,
        duration,
        answer,
        host,
        pod: None,
    })
}

/// What an `outcome` (or a detached attempt's `upstream`) word says the dependency answered:
/// `None` for an outcome that is no call to it.
fn judged(word: &str) -> Result<Option<Answer>, String> {
    Ok(match word {
        "ok" => Some(Answer::Success),
        "upstream_error" | "timeout" | "unreachable" | "body_error" | "body_timeout" => {
            Some(Answer::Failure)
        }
        "refused" | "ejected" => Some(Answer::Unknown),
        "client_fault" | "gave_up" | "capped" | "deadline" | "bad_request" | "no_route"
        | "rate_limited" | "exhausted" => None,
        other => return Err(format!("unknown outcome {}", super::quoted(other))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = "2026-12-04T10:00:01.500000Z  INFO request request_id=5f3a-1 method=GET \
                      path=/accounts/7 cluster=account-service host=127.0.0.1:7001 status=200 \
                      duration=1.2ms decision=admitted outcome=ok";

    fn call(line: &str) -> (u64, u64, Answer, Option<String>) {
        match entry(line, None, &mut None).unwrap() {
            Entry::Call {
                at,
                duration,
                answer,
                host,
                ..
            } => (at, duration, answer, host),
            Entry::Skip | Entry::Cluster(_) => panic!("skipped: {line}"),
        }
    }

    #[test]
    fn an_access_line_is_a_call_ending_at_its_timestamp() {
        let (at, duration, answer, host) = call(OK);
        assert_eq!(at % 1_000_000_000, 500_000_000);
        assert_eq!(duration, 1_200_000);
        assert_eq!(answer, Answer::Success);
        assert_eq!(host.as_deref(), Some("127.0.0.1:7001"));
    }

    #[test]
    fn outcomes_map_to_what_the_dependency_answered() {
        let with = |outcome: &str| OK.replace("outcome=ok", outcome);
        assert_eq!(call(&with("outcome=timeout")).2, Answer::Failure);
        assert_eq!(call(&with("outcome=upstream_error")).2, Answer::Failure);
        assert_eq!(
            call(&with("outcome=refused reason=open").replace("host=127.0.0.1:7001", "host=-")).3,
            None
        );
        assert_eq!(call(&with("outcome=refused")).2, Answer::Unknown);
        assert_eq!(
            call(&with("outcome=gave_up counted=detached upstream=timeout")).2,
            Answer::Failure
        );
        for skipped in [
            "outcome=gave_up counted=dropped",
            "outcome=client_fault",
            "outcome=no_route",
            "outcome=exhausted",
        ] {
            assert!(
                matches!(entry(&with(skipped), None, &mut None), Ok(Entry::Skip)),
                "{skipped}"
            );
        }
        assert!(entry(&with("outcome=sideways"), None, &mut None).is_err());
    }

    #[test]
    fn a_long_duration_with_a_space_is_read_whole() {
        let line = OK.replace("duration=1.2ms", "duration=2m 30s");
        assert_eq!(call(&line).1, 150_000_000_000);
    }

    #[test]
    fn other_lines_and_other_clusters_are_skipped_and_truncated_ones_named() {
        let other = "2026-12-04T10:00:00Z  INFO listening on 127.0.0.1:8080";
        assert!(matches!(entry(other, None, &mut None), Ok(Entry::Skip)));
        assert!(matches!(
            entry(OK, Some("billing"), &mut None),
            Ok(Entry::Skip)
        ));
        assert!(matches!(
            entry(OK, Some("account-service"), &mut None),
            Ok(Entry::Call { .. })
        ));
        let truncated = &OK[..OK.find("duration").unwrap()];
        assert!(entry(truncated, None, &mut None).is_err());
        let coloured = OK.replace("INFO", "\u{1b}[32m INFO\u{1b}[0m");
        assert_eq!(call(&coloured).2, Answer::Success);
    }

    #[test]
    fn without_a_cluster_named_a_second_cluster_is_named() {
        let mut first = None;
        assert!(matches!(
            entry(OK, None, &mut first),
            Ok(Entry::Call { .. })
        ));
        assert_eq!(first.as_deref(), Some("account-service"));
        let billing = OK.replace("cluster=account-service", "cluster=billing");
        assert!(matches!(
            entry(&billing, None, &mut first),
            Ok(Entry::Cluster(c)) if c == "billing"
        ));
        assert!(matches!(
            entry(OK, None, &mut first),
            Ok(Entry::Call { .. })
        ));
    }
}
