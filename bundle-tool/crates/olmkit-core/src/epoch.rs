//! Reproducible timestamps.
//!
//! Generated files and images carry a time (CSV `createdAt`, image `created`, tar mtimes). To make
//! the same inputs give byte-identical outputs, that time comes from `SOURCE_DATE_EPOCH` when set,
//! as the reproducible-builds convention asks.

use jiff::Timestamp;
use thiserror::Error;

/// Name of the environment variable.
pub const SOURCE_DATE_EPOCH: &str = "SOURCE_DATE_EPOCH";

/// `SOURCE_DATE_EPOCH` is set but unusable.
#[derive(Debug, Error)]
#[error("SOURCE_DATE_EPOCH={value:?} is not a number of seconds since 1970-01-01 UTC")]
pub struct ReadEpochError {
    /// The offending value.
    pub value: String,
}

/// Parses a `SOURCE_DATE_EPOCH` value.
pub fn parse_epoch(value: &str) -> Result<Timestamp, ReadEpochError> {
    value
        .trim()
        .parse::<i64>()
        .ok()
        .and_then(|s| Timestamp::from_second(s).ok())
        .ok_or_else(|| ReadEpochError {
            value: value.to_string(),
        })
}

/// The time from `SOURCE_DATE_EPOCH`, or `None` when it is unset or empty.
pub fn source_date_epoch() -> Result<Option<Timestamp>, ReadEpochError> {
    match std::env::var(SOURCE_DATE_EPOCH) {
        Ok(v) if !v.trim().is_empty() => parse_epoch(&v).map(Some),
        _ => Ok(None),
    }
}

/// The time from `SOURCE_DATE_EPOCH`, or the current time.
pub fn build_time() -> Result<Timestamp, ReadEpochError> {
    Ok(source_date_epoch()?.unwrap_or_else(Timestamp::now))
}

/// RFC 3339 UTC with second precision (`2024-01-02T03:04:05Z`), the form CSVs and OCI configs use.
pub fn rfc3339(ts: Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        assert_eq!(
            rfc3339(parse_epoch("1700000000").unwrap()),
            "2023-11-14T22:13:20Z"
        );
        assert!(parse_epoch("yesterday").is_err());
    }
}
