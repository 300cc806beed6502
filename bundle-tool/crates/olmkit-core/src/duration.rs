//! Durations written the Go way: `10m`, `1h30m`, `500ms`, `1.5h`.
//!
//! Kubernetes objects and Go command lines spell durations in Go's `time.ParseDuration`
//! grammar: an optional sign, then one or more decimal numbers each followed by a unit (`ns`,
//! `us`/`µs`/`μs`, `ms`, `s`, `m`, `h`), or the bare `0`. OLM parses `registryPoll.interval` this
//! way and operators built on controller-runtime take their flags this way, so every duration
//! our tools accept is parsed here, with Go's arithmetic (integer nanoseconds, a fraction
//! truncated towards zero, at most `i64::MAX` nanoseconds) and Go's error texts.
//! [`format_duration`] prints like Go's `Duration.String`, and parsing its output gives the
//! duration back.

use std::time::Duration;

/// Why a text is not a duration. The texts are Go's (`time: ...`), except [`Negative`], which Go
/// accepts but a [`Duration`] cannot hold.
///
/// [`Negative`]: ParseDurationError::Negative
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseDurationError {
    /// Not the grammar, or more than `i64::MAX` nanoseconds.
    #[error("time: invalid duration {0:?}")]
    Invalid(String),
    /// A number without a unit (`10`).
    #[error("time: missing unit in duration {0:?}")]
    MissingUnit(String),
    /// A unit Go does not know (`5d`).
    #[error("time: unknown unit {unit:?} in duration {input:?}")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole input.
        input: String,
    },
    /// A valid but negative duration (`-5s`).
    #[error("duration {0:?} must not be negative")]
    Negative(String),
}

/// Nanoseconds per unit, as Go's `unitMap`.
fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// The longest duration Go represents, in nanoseconds (`1<<63 - 1`); a negative one may be one
/// more.
const MAX_NANOS: u64 = i64::MAX as u64;

/// Leading decimal digits as an integer; `None` on overflow past `1<<63` (Go's `leadingInt`).
fn leading_int(s: &str) -> (Option<u64>, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut x: u64 = 0;
    for d in s[..end].bytes() {
        let next = x
            .checked_mul(10)
            .and_then(|x| x.checked_add(u64::from(d - b'0')))
            .filter(|x| *x <= MAX_NANOS + 1);
        match next {
            Some(n) => x = n,
            None => return (None, &s[end..]),
        }
    }
    (Some(x), &s[end..])
}

/// Leading fraction digits as `(value, scale)`; digits past what fits are dropped, as in Go's
/// `leadingFraction`.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (mut x, mut scale, mut overflow) = (0u64, 1.0f64, false);
    for d in s[..end].bytes() {
        if overflow {
            continue;
        }
        if x > MAX_NANOS / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(d - b'0');
        if y > MAX_NANOS + 1 {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[end..])
}

/// Parses `text` as Go's `time.ParseDuration` does; a negative duration is refused.
pub fn parse_duration(text: &str) -> Result<Duration, ParseDurationError> {
    let invalid = || ParseDurationError::Invalid(text.to_string());
    let (negative, mut s) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !s.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        let before = s.len();
        let (whole, rest) = leading_int(s);
        let whole = whole.ok_or_else(invalid)?;
        let has_int = rest.len() != before;
        s = rest;
        let (mut frac, mut scale, mut has_frac) = (0u64, 1.0f64, false);
        if let Some(rest) = s.strip_prefix('.') {
            let (f, sc, rest2) = leading_fraction(rest);
            (frac, scale, has_frac) = (f, sc, rest2.len() != rest.len());
            s = rest2;
        }
        if !has_int && !has_frac {
            return Err(invalid());
        }
        let unit_end = s
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        let unit = &s[..unit_end];
        s = &s[unit_end..];
        if unit.is_empty() {
            return Err(ParseDurationError::MissingUnit(text.to_string()));
        }
        let per = unit_nanos(unit).ok_or_else(|| ParseDurationError::UnknownUnit {
            unit: unit.to_string(),
            input: text.to_string(),
        })?;
        if whole > (MAX_NANOS + 1) / per {
            return Err(invalid());
        }
        let mut v = whole * per;
        if frac > 0 {
            // Go converts through float64 here; doing the same keeps `1.1s` etc. bit-identical.
            let part = (frac as f64 * (per as f64 / scale)) as u64;
            v = v
                .checked_add(part)
                .filter(|v| *v <= MAX_NANOS + 1)
                .ok_or_else(invalid)?;
        }
        total = total
            .checked_add(v)
            .filter(|t| *t <= MAX_NANOS + 1)
            .ok_or_else(invalid)?;
    }
    if negative {
        return if total == 0 {
            Ok(Duration::ZERO)
        } else {
            Err(ParseDurationError::Negative(text.to_string()))
        };
    }
    if total > MAX_NANOS {
        return Err(invalid());
    }
    Ok(Duration::from_nanos(total))
}

/// Writes `v / 10^digits` with the trailing zeros of the fraction dropped (`1.5`, `2`).
fn push_decimal(out: &mut String, v: u128, digits: u32) {
    let unit = 10u128.pow(digits);
    out.push_str(&(v / unit).to_string());
    let frac = v % unit;
    if frac != 0 {
        let text = format!("{frac:0width$}", width = digits as usize);
        out.push('.');
        out.push_str(text.trim_end_matches('0'));
    }
}

/// Formats `d` as Go's `Duration.String`: `0s`, `250ms`, `1.5µs`, `1h30m0s`, `2m0.5s`.
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    let mut out = String::new();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000_000_000 {
        let (digits, unit) = match nanos {
            n if n < 1_000 => (0, "ns"),
            n if n < 1_000_000 => (3, "\u{b5}s"),
            _ => (6, "ms"),
        };
        push_decimal(&mut out, nanos, digits);
        out.push_str(unit);
        return out;
    }
    let hours = nanos / 3_600_000_000_000;
    let minutes = nanos / 60_000_000_000 % 60;
    let seconds = nanos % 60_000_000_000;
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    push_decimal(&mut out, seconds, 9);
    out.push('s');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(s: &str) -> Duration {
        parse_duration(s).unwrap()
    }

    #[test]
    fn go_grammar() {
        assert_eq!(ok("10m"), Duration::from_secs(600));
        assert_eq!(ok("1h30m"), Duration::from_secs(5400));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("1m30.5s"), Duration::from_millis(90_500));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("5.s"), Duration::from_secs(5));
        assert_eq!(ok("+3us"), Duration::from_micros(3));
        assert_eq!(ok("3µs"), Duration::from_micros(3));
        assert_eq!(ok("3μs"), Duration::from_micros(3));
        assert_eq!(ok("7ns"), Duration::from_nanos(7));
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("-0"), Duration::ZERO);
        assert_eq!(ok("-0s"), Duration::ZERO);
        assert_eq!(ok("1.0000000001s"), Duration::from_nanos(1_000_000_000));
        assert_eq!(
            ok("2562047h47m16.854775807s"),
            Duration::from_nanos(MAX_NANOS)
        );
    }

    #[test]
    fn go_errors() {
        let e = |s: &str| parse_duration(s).unwrap_err().to_string();
        assert_eq!(e(""), "time: invalid duration \"\"");
        assert_eq!(e("10"), "time: missing unit in duration \"10\"");
        assert_eq!(e("5d"), "time: unknown unit \"d\" in duration \"5d\"");
        assert_eq!(e("."), "time: invalid duration \".\"");
        assert_eq!(e(".s"), "time: invalid duration \".s\"");
        assert_eq!(
            e("1m 30s"),
            "time: unknown unit \"m \" in duration \"1m 30s\""
        );
        assert_eq!(e("PT10S"), "time: invalid duration \"PT10S\"");
        assert_eq!(e("-5s"), "duration \"-5s\" must not be negative");
        assert_eq!(
            e("2562047h47m16.854775808s"),
            "time: invalid duration \"2562047h47m16.854775808s\""
        );
        assert!(parse_duration("99999999999999999999h").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("1h-1m").is_err());
    }

    #[test]
    fn prints_like_go() {
        let f = |n: u64| format_duration(Duration::from_nanos(n));
        assert_eq!(f(0), "0s");
        assert_eq!(f(7), "7ns");
        assert_eq!(f(1_500), "1.5µs");
        assert_eq!(f(250_000_000), "250ms");
        assert_eq!(f(1_500_000_000), "1.5s");
        assert_eq!(f(90_500_000_000), "1m30.5s");
        assert_eq!(f(5_400_000_000_000), "1h30m0s");
        assert_eq!(f(MAX_NANOS), "2562047h47m16.854775807s");
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,24}") {
            let _ = parse_duration(&s);
        }

        #[test]
        fn format_then_parse_is_identity(n in 0u64..=MAX_NANOS) {
            let d = Duration::from_nanos(n);
            prop_assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }

        #[test]
        fn units_add_up(h in 0u64..1000, m in 0u64..1000, s in 0u64..1000, ms in 0u64..1000) {
            let d = ok(&format!("{h}h{m}m{s}s{ms}ms"));
            prop_assert_eq!(d, Duration::from_millis(((h * 60 + m) * 60 + s) * 1000 + ms));
        }
    }
}
