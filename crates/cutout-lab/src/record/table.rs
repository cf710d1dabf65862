//! The CSV and JSON-lines shapes of a record: `timestamp` (the call's start), `duration`,
//! `outcome` and an optional `host` and `pod` (see the module docs of `record`).

use super::{Entry, answer, duration, timestamp};

/// The columns of a CSV record, from its header.
pub(super) struct Header {
    timestamp: usize,
    duration: usize,
    outcome: usize,
    host: Option<usize>,
    pod: Option<usize>,
    reader: std::cell::RefCell<csv_core::Reader>,
}

/// A CSV line's fields (quoted fields unquoted), through `csv-core`.
fn fields(reader: &mut csv_core::Reader, line: &str) -> Result<Vec<String>, String> {
    reader.reset();
    let mut input = line.as_bytes();
    let mut output = vec![0u8; line.len() + 1];
    let mut ends = vec![0usize; line.len() + 2];
    let (mut out_at, mut ends_at) = (0, 0);
    loop {
        let (result, read, written, ended) =
            reader.read_record(input, &mut output[out_at..], &mut ends[ends_at..]);
        input = &input[read..];
        // The ends count from the row's start, across calls (csv-core's docs).
        out_at += written;
        ends_at += ended;
        match result {
            csv_core::ReadRecordResult::InputEmpty => {
                if input.is_empty() {
                    // The line's end is the record's end.
                    continue;
                }
            }
            csv_core::ReadRecordResult::Record | csv_core::ReadRecordResult::End => break,
            csv_core::ReadRecordResult::OutputFull | csv_core::ReadRecordResult::OutputEndsFull => {
                return Err("a CSV line with more fields than bytes".into());
            }
        }
    }
    let mut start = 0;
    ends[..ends_at]
        .iter()
        .map(|&end| {
            let field = std::str::from_utf8(&output[start..end])
                .map(str::to_owned)
                .map_err(|_| "a field that is not UTF-8".to_owned());
            start = end;
            field
        })
        .collect()
}

impl Header {
    /// The header line's columns: `timestamp`, `duration` and `outcome` are required.
    pub(super) fn parse(line: &str) -> Result<Header, String> {
        let mut reader = csv_core::Reader::new();
        let names = fields(&mut reader, line)?;
        let find = |name: &str| {
            names
                .iter()
                .position(|n| n.trim().eq_ignore_ascii_case(name))
        };
        let need = |name: &str| {
            find(name).ok_or_else(|| {
                format!(
                    "the CSV header {} has no {name:?} column (it needs timestamp, \
                     duration and outcome; host and pod are optional)",
                    super::quoted(line)
                )
            })
        };
        Ok(Header {
            timestamp: need("timestamp")?,
            duration: need("duration")?,
            outcome: need("outcome")?,
            host: find("host"),
            pod: find("pod"),
            reader: std::cell::RefCell::new(reader),
        })
    }

    /// The optional column `column` of a line's `fields`, unless absent or blank.
    fn optional(&self, column: Option<usize>, fields: &[String]) -> Option<String> {
        column
            .and_then(|i| fields.get(i))
            .map(|f| f.trim())
            .filter(|f| !f.is_empty())
            .map(str::to_owned)
    }

    /// The entry of one CSV line.
    pub(super) fn entry(&self, line: &str) -> Result<Entry, String> {
        if line.trim().is_empty() {
            return Ok(Entry::Skip);
        }
        let fields = fields(&mut self.reader.borrow_mut(), line)?;
        let get = |i: usize, name: &str| {
            fields
                .get(i)
                .map(String::as_str)
                .ok_or_else(|| format!("no {name} field (truncated?)"))
        };
        let Some(answer) = answer(get(self.outcome, "outcome")?)? else {
            return Ok(Entry::Skip);
        };
        Ok(Entry::Call {
            at: timestamp(get(self.timestamp, "timestamp")?)?,
            duration: duration(get(self.duration, "duration")?, true)?,
            answer,
            host: self.optional(self.host, &fields),
            pod: self.optional(self.pod, &fields),
        })
    }
}

/// The entry of one JSON line: an object with `timestamp`, `duration`, `outcome` and an
/// optional `host` and `pod`; a timestamp or duration may be a number (epoch seconds,
/// milliseconds).
pub(super) fn json_entry(line: &str) -> Result<Entry, String> {
    if line.trim().is_empty() {
        return Ok(Entry::Skip);
    }
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let object = value.as_object().ok_or("not a JSON object")?;
    let text = |name: &str| -> Result<String, String> {
        match object.get(name) {
            Some(serde_json::Value::String(s)) => Ok(s.clone()),
            Some(serde_json::Value::Number(n)) => Ok(n.to_string()),
            Some(_) => Err(format!("{name} is neither a string nor a number")),
            None => Err(format!("no {name:?} key")),
        }
    };
    let Some(answer) = answer(&text("outcome")?)? else {
        return Ok(Entry::Skip);
    };
    Ok(Entry::Call {
        at: timestamp(&text("timestamp")?)?,
        duration: duration(&text("duration")?, true)?,
        answer,
        host: optional(object, "host"),
        pod: optional(object, "pod"),
    })
}

/// An optional key of a JSON line: a string not blank, trimmed as a CSV field is, or a
/// number as written (a pod or host numbered 7; `7.0` is another name).
fn optional(object: &serde_json::Map<String, serde_json::Value>, key: &str) -> Option<String> {
    match object.get(key)? {
        serde_json::Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::Answer;
    use super::*;

    #[test]
    fn a_csv_header_in_any_order_and_quoted_fields() {
        let header = Header::parse("outcome,extra,duration,host,timestamp").unwrap();
        let Entry::Call {
            answer,
            host,
            duration,
            ..
        } = header
            .entry("error,x,12.5,\"10.0.0.7:7001\",2026-12-04T10:00:00Z")
            .unwrap()
        else {
            panic!("skipped")
        };
        assert_eq!(answer, Answer::Failure);
        assert_eq!(host.as_deref(), Some("10.0.0.7:7001"));
        assert_eq!(duration, 12_500_000);
        assert!(Header::parse("time,duration,outcome").is_err());
        assert!(header.entry("error,x").is_err(), "truncated");
        let with_pod = Header::parse("timestamp,duration,outcome,pod").unwrap();
        let Entry::Call { pod, host, .. } =
            with_pod.entry("2026-12-04T10:00:00Z,3,ok, api-7 ").unwrap()
        else {
            panic!("skipped")
        };
        assert_eq!((pod.as_deref(), host), (Some("api-7"), None));
    }

    #[test]
    fn a_json_line_with_numbers_or_strings() {
        let Entry::Call {
            at,
            duration,
            answer,
            host,
            pod,
        } = json_entry(
            r#"{"timestamp": 1796378400.5, "duration": "1.2s", "outcome": "ok", "host": "a", "pod": 7}"#,
        )
        .unwrap()
        else {
            panic!("skipped")
        };
        assert_eq!(pod.as_deref(), Some("7"), "a pod numbered as a number");
        let Entry::Call {
            host: trimmed,
            pod: blank,
            ..
        } = json_entry(
            r#"{"timestamp": 1796378400.5, "duration": 3, "outcome": "ok", "host": " a ", "pod": "  "}"#,
        )
        .unwrap() else {
            panic!("skipped")
        };
        assert_eq!(
            (trimmed.as_deref(), blank),
            (Some("a"), None),
            "trimmed as CSV fields are"
        );
        assert_eq!(at, 1_796_378_400_500_000_000);
        assert_eq!(duration, 1_200_000_000);
        assert_eq!(answer, Answer::Success);
        assert_eq!(host.as_deref(), Some("a"));
        assert!(json_entry(r#"{"timestamp": 1, "duration": 2}"#).is_err());
        assert!(json_entry(r#"{"timestamp": 1, "dura"#).is_err());
        assert!(matches!(
            json_entry(r#"{"timestamp": 1, "duration": 2, "outcome": "ignored"}"#),
            Ok(Entry::Skip)
        ));
    }
}
