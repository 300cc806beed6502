//! A YAML emitter that writes what `sigs.k8s.io/yaml` (and so `opm render -o yaml`) writes.
//!
//! opm turns each blob into JSON, re-reads that JSON with go-yaml v2 and emits it with go-yaml
//! v2's port of libyaml's emitter. This module reproduces that pipeline's observable rules for
//! JSON values, written from go-yaml v2's documented behaviour (`encode.go` `stringv`/`floatv`,
//! `resolve.go` `resolve`, `sorter.go` `keyList.Less`, `emitterc.go`
//! `yaml_emitter_analyze_scalar`, `yaml_emitter_select_scalar_style` and the
//! `yaml_emitter_write_*_scalar` writers):
//! - map keys in go-yaml's "natural" order (digit runs compared as numbers);
//! - strings that would resolve to another type (numbers, booleans, null, timestamps,
//!   base-60 floats) are double-quoted; multi-line strings are literal blocks; otherwise plain,
//!   falling back to single then double quotes when the characters require it;
//! - plain and quoted scalars are folded at spaces past column 80; continuation lines are
//!   indented one level deeper;
//! - sequences inside mappings are not indented; empty collections are `{}` / `[]`;
//! - numbers go through Go's `encoding/json` float formatting, then go-yaml's int/float
//!   resolution (`-0` becomes `0`, `1.5e-7` becomes `1.5e-07`).
//!
//! go-yaml's reader rejects some characters that Go's JSON encoder leaves raw (U+007F,
//! U+0080..U+009F except U+0085, U+FFFE, U+FFFF): those make [`to_yaml`] fail like opm does.

use serde_json::Value;
use std::cmp::Ordering;
use thiserror::Error;

/// A value cannot be written as YAML the way go-yaml would.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum GoYamlError {
    /// A string holds a character go-yaml's reader refuses (opm fails the same way).
    #[error("yaml: control characters are not allowed")]
    ControlCharacter,
}

/// go-yaml's preferred line width.
const BEST_WIDTH: usize = 80;
/// go-yaml's indentation step.
const BEST_INDENT: i32 = 2;

/// Formats a float like Go's `encoding/json` (`floatEncoder`): shortest digits, `%f` form for
/// 1e-6 <= |f| < 1e21, `%e` form otherwise with a one-digit negative exponent kept short
/// (`1e-7`, `1e+21`).
pub fn go_json_float(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = format_e(f);
        // Go's json cleans `e-07` into `e-7` (only for negative exponents).
        match s.find("e-0") {
            Some(i) if s.len() == i + 4 => format!("{}e-{}", &s[..i], &s[i + 3..]),
            _ => s,
        }
    } else {
        format_f(f)
    }
}

/// Shortest round-trip digits and decimal exponent of `f` (d.ddd × 10^exp).
fn shortest_digits(f: f64) -> (bool, String, i32) {
    let s = format!("{:e}", f);
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    (neg, digits, exp.parse().unwrap_or(0))
}

/// `strconv.FormatFloat(f, 'e', -1, 64)`.
fn format_e(f: f64) -> String {
    let (neg, digits, exp) = shortest_digits(f);
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    out.push_str(&digits[..1]);
    if digits.len() > 1 {
        out.push('.');
        out.push_str(&digits[1..]);
    }
    out.push('e');
    out.push(if exp < 0 { '-' } else { '+' });
    let e = exp.unsigned_abs();
    if e < 10 {
        out.push('0');
    }
    out.push_str(&e.to_string());
    out
}

/// `strconv.FormatFloat(f, 'f', -1, 64)`.
fn format_f(f: f64) -> String {
    let (neg, digits, exp) = shortest_digits(f);
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if digits == "0" {
        out.push('0');
        return out;
    }
    if exp < 0 {
        out.push_str("0.");
        for _ in 0..(-exp - 1) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            out.push_str(&digits);
            for _ in digits.len()..int_len {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..int_len]);
            out.push('.');
            out.push_str(&digits[int_len..]);
        }
    }
    out
}

/// `strconv.FormatFloat(f, 'g', -1, 64)` with go-yaml's names for infinities and NaN.
fn format_g(f: f64) -> String {
    if f.is_nan() {
        return ".nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    let (_, _, exp) = shortest_digits(f);
    // Go: with shortest formatting the %e threshold is 6 digits of exponent.
    if f != 0.0 && !(-4..6).contains(&exp) {
        format_e(f)
    } else {
        format_f(f)
    }
}

/// How go-yaml writes a number that arrived as the JSON text Go's encoder produced.
fn number_text(n: &serde_json::Number) -> String {
    let json = if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        go_json_float(n.as_f64().unwrap_or(0.0))
    };
    // go-yaml's resolve: int64, then uint64, then float.
    if let Ok(i) = json.parse::<i64>() {
        return i.to_string();
    }
    if let Ok(u) = json.parse::<u64>() {
        return u.to_string();
    }
    format_g(json.parse::<f64>().unwrap_or(0.0))
}

/// go-yaml's `keyList.Less` for two string keys: non-letters before letters, runs of digits
/// compared by value.
pub fn key_less(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        // The common case, without decoding (keys are compared a lot).
        key_less_in(a.as_bytes(), b.as_bytes(), char::from)
    } else {
        let ar: Vec<char> = a.chars().collect();
        let br: Vec<char> = b.chars().collect();
        key_less_in(&ar, &br, |c| c)
    }
}

fn key_less_in<T: Copy + PartialEq>(ar: &[T], br: &[T], ch: impl Fn(T) -> char) -> bool {
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            i += 1;
            continue;
        }
        let (a, b) = (ch(ar[i]), ch(br[i]));
        let al = a.is_alphabetic();
        let bl = b.is_alphabetic();
        if al && bl {
            return a < b;
        }
        if al || bl {
            return bl;
        }
        let (mut an, mut bn): (i64, i64) = (0, 0);
        if a == '0' || b == '0' {
            let mut j = i;
            while j > 0 && ch(ar[j - 1]).is_ascii_digit() {
                j -= 1;
                if ch(ar[j]) != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let digit = |c: char| i64::from(c as u8 - b'0');
        let mut ai = i;
        while ai < ar.len() && ch(ar[ai]).is_ascii_digit() {
            an = an.wrapping_mul(10).wrapping_add(digit(ch(ar[ai])));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && ch(br[bi]).is_ascii_digit() {
            bn = bn.wrapping_mul(10).wrapping_add(digit(ch(br[bi])));
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return a < b;
    }
    ar.len() < br.len()
}

fn key_cmp(a: &str, b: &str) -> Ordering {
    if key_less(a, b) {
        Ordering::Less
    } else if key_less(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// True when go-yaml's reader would refuse `c` in its input.
fn rejected_by_reader(c: char) -> bool {
    let v = c as u32;
    !(v == 0x09
        || v == 0x0A
        || v == 0x0D
        || (0x20..=0x7E).contains(&v)
        || v == 0x85
        || (0xA0..=0xD7FF).contains(&v)
        || (0xE000..=0xFFFD).contains(&v)
        || (0x10000..=0x10FFFF).contains(&v))
        // Go's JSON encoder escapes the C0 controls, so the reader never sees them raw.
        && v >= 0x20
}

/// Go's `strconv.ParseInt(s, 0, 64)` / `ParseUint` acceptance (base prefixes, sign).
fn go_parses_int(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (radix, digits) =
        if let Some(r) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
            (16, r)
        } else if let Some(r) = body.strip_prefix("0o").or_else(|| body.strip_prefix("0O")) {
            (8, r)
        } else if let Some(r) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
            (2, r)
        } else if body.len() > 1 && body.starts_with('0') {
            (8, &body[1..])
        } else {
            (10, body)
        };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return false;
    }
    let neg = s.starts_with('-');
    match u64::from_str_radix(digits, radix) {
        Ok(v) if neg => v <= 1 << 63,
        Ok(v) => s.starts_with('+') && v <= i64::MAX as u64 || !s.starts_with('+'),
        Err(_) => false,
    }
}

/// go-yaml's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go's `time.Parse` on go-yaml's timestamp layouts (`2006-1-2`, with an optional
/// `T15:4:5.999999999Z07:00`, `t...` or ` 15:4:5.999999999` time part).
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let year_len = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if year_len != 4 || b.get(4) != Some(&b'-') {
        return false;
    }
    let mut i = 5;
    // 1 or 2 digits within [lo, hi].
    let num = |i: &mut usize, lo: u32, hi: u32| -> bool {
        let start = *i;
        while *i < b.len() && *i - start < 2 && b[*i].is_ascii_digit() {
            *i += 1;
        }
        if *i == start {
            return false;
        }
        let v: u32 = s[start..*i].parse().unwrap_or(99);
        (lo..=hi).contains(&v)
    };
    let year: u32 = s[..4].parse().unwrap_or(0);
    let month_start = i;
    if !num(&mut i, 1, 12) {
        return false;
    }
    let month: u32 = s[month_start..i].parse().unwrap_or(0);
    if b.get(i) != Some(&b'-') {
        return false;
    }
    i += 1;
    let day_start = i;
    if !num(&mut i, 1, 31) {
        return false;
    }
    let day: u32 = s[day_start..i].parse().unwrap_or(0);
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if day > days {
        return false;
    }
    if i == b.len() {
        return true;
    }
    let zoned = match b[i] {
        b'T' | b't' => true,
        b' ' => false,
        _ => return false,
    };
    i += 1;
    if !num(&mut i, 0, 23) || b.get(i) != Some(&b':') {
        return false;
    }
    i += 1;
    if !num(&mut i, 0, 59) || b.get(i) != Some(&b':') {
        return false;
    }
    i += 1;
    if !num(&mut i, 0, 59) {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    if !zoned {
        return i == b.len();
    }
    match &s[i..] {
        "Z" => true,
        z if z.len() == 6 => {
            let z = z.as_bytes();
            matches!(z[0], b'+' | b'-')
                && z[1].is_ascii_digit()
                && z[2].is_ascii_digit()
                && z[3] == b':'
                && z[4].is_ascii_digit()
                && z[5].is_ascii_digit()
        }
        _ => false,
    }
}

/// go-yaml's `isBase60Float`: `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`.
fn is_base60_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    if !b.get(i).is_some_and(u8::is_ascii_digit) {
        return false;
    }
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
        i += 1;
    }
    let mut groups = 0;
    while b.get(i) == Some(&b':') {
        i += 1;
        let start = i;
        while i < b.len() && i - start < 2 && b[i].is_ascii_digit() {
            i += 1;
        }
        match i - start {
            1 => {}
            2 if b[start] <= b'5' => {}
            _ => return false,
        }
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            i += 1;
        }
    }
    i == b.len()
}

/// True when go-yaml's `resolve` reads the plain scalar `s` as something other than a string
/// (or `stringv` refuses it as a base-60 float): such strings must be double-quoted.
pub fn needs_quotes(s: &str) -> bool {
    const MAP: &[&str] = &[
        "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", "n", "N", "no",
        "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", "", "~", "null", "Null",
        "NULL", ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
        "-.Inf", "-.INF", "<<",
    ];
    if is_base60_float(s) {
        return true;
    }
    let Some(&first) = s.as_bytes().first() else {
        return true;
    };
    let hint = match first {
        b'+' | b'-' | b'0'..=b'9' => 'D',
        b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~' => 'M',
        b'.' => '.',
        _ => return false,
    };
    if MAP.contains(&s) {
        return true;
    }
    match hint {
        '.' => yaml_style_float(s) && s.parse::<f64>().is_ok_and(f64::is_finite),
        'D' => {
            if is_timestamp(s) {
                return true;
            }
            let plain = if s.contains('_') {
                std::borrow::Cow::Owned(s.replace('_', ""))
            } else {
                std::borrow::Cow::Borrowed(s)
            };
            go_parses_int(&plain)
                || (yaml_style_float(&plain) && plain.parse::<f64>().is_ok_and(f64::is_finite))
        }
        _ => false,
    }
}

/// Go's JSON encoder leaves U+0085 (NEL) raw, and go-yaml reads it inside the double-quoted
/// JSON string as a line break, which flow scalars fold: spaces around the breaks are dropped,
/// one break becomes a space, `n` breaks become `n - 1` newlines.
fn fold_nel(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains('\u{85}') {
        return std::borrow::Cow::Borrowed(s);
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != ' ' && chars[i] != '\u{85}' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        // A run of spaces: does a NEL follow it?
        let mut j = i;
        let mut breaks = 0;
        while j < chars.len() && (chars[j] == ' ' || chars[j] == '\u{85}') {
            breaks += usize::from(chars[j] == '\u{85}');
            j += 1;
        }
        match breaks {
            0 => out.extend(&chars[i..j]),
            1 => out.push(' '),
            n => out.extend(std::iter::repeat_n('\n', n - 1)),
        }
        i = j;
    }
    std::borrow::Cow::Owned(out)
}

/// ASCII letters, digits and `+/=._-`, not starting with `-` or `.` (so never an indicator,
/// `---` or `...`): such a scalar is plain unless it resolves to another type.
fn is_plain_token(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(['-', '.'])
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                | (b == b'+')
                | (b == b'/')
                | (b == b'=')
                | (b == b'.')
                | (b == b'_')
                | (b == b'-')
        })
}

/// Scalar styles of the emitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

/// What `yaml_emitter_analyze_scalar` finds out about a scalar.
struct Analysis {
    multiline: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

fn is_break_char(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// libyaml's `is_printable` (with `unicode` on, as go-yaml sets it).
fn is_printable(c: char) -> bool {
    let v = c as u32;
    v == 0x0A
        || (0x20..=0x7E).contains(&v)
        || (0xA0..=0xD7FF).contains(&v)
        || ((0xE000..=0xFFFD).contains(&v) && v != 0xFEFF)
}

fn analyze(s: &str) -> Analysis {
    if s.is_empty() {
        return Analysis {
            multiline: false,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: false,
        };
    }
    let mut block_indicators = s.starts_with("---") || s.starts_with("...");
    let (mut line_breaks, mut special) = (false, false);
    let (mut leading_space, mut leading_break) = (false, false);
    let (mut trailing_space, mut trailing_break) = (false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut previous_space, mut previous_break) = (false, false);
    let mut preceded_by_whitespace = true;
    let mut iter = s.chars().peekable();
    let mut i = 0;
    while let Some(c) = iter.next() {
        let next = iter.peek().copied();
        let followed_by_whitespace = next.is_none_or(|n| n == ' ' || n == '\t' || is_break_char(n));
        let last = next.is_none();
        if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"'
                | '%' | '@' | '`' => block_indicators = true,
                '?' | ':' | '-' if followed_by_whitespace => block_indicators = true,
                _ => {}
            }
        } else {
            match c {
                ':' if followed_by_whitespace => block_indicators = true,
                '#' if preceded_by_whitespace => block_indicators = true,
                _ => {}
            }
        }
        if !is_printable(c) {
            special = true;
        }
        if c == ' ' {
            leading_space |= i == 0;
            trailing_space |= last;
            break_space |= previous_break;
            previous_space = true;
            previous_break = false;
        } else if is_break_char(c) {
            line_breaks = true;
            leading_break |= i == 0;
            trailing_break |= last;
            space_break |= previous_space;
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = c == ' ' || c == '\t' || is_break_char(c);
        i += 1;
    }
    let mut a = Analysis {
        multiline: line_breaks,
        block_plain_allowed: true,
        single_quoted_allowed: true,
        block_allowed: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break || line_breaks {
        a.block_plain_allowed = false;
    }
    if trailing_space {
        a.block_allowed = false;
    }
    if break_space {
        a.block_plain_allowed = false;
        a.single_quoted_allowed = false;
    }
    if space_break || special {
        a.block_plain_allowed = false;
        a.single_quoted_allowed = false;
        a.block_allowed = false;
    }
    if block_indicators {
        a.block_plain_allowed = false;
    }
    a
}

/// The emitter's writing state (libyaml's `column`, `whitespace`, `indention`, `indent`).
struct Emitter {
    out: String,
    column: usize,
    whitespace: bool,
    indention: bool,
    indent: i32,
    indents: Vec<i32>,
}

impl Emitter {
    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }
    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }
    /// libyaml's `write_break` for a break character of the value.
    fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.put_break();
        } else {
            self.out.push(c);
            self.column = 0;
        }
    }
    fn write_indent(&mut self) {
        let indent = self.indent.max(0) as usize;
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
        self.indention = true;
    }
    fn write_indicator(&mut self, ind: &str, need_ws: bool, is_ws: bool, is_indention: bool) {
        if need_ws && !self.whitespace {
            self.put(' ');
        }
        for c in ind.chars() {
            self.put(c);
        }
        self.whitespace = is_ws;
        self.indention = self.indention && is_indention;
    }
    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.indents.push(self.indent);
        if self.indent < 0 {
            self.indent = if flow { BEST_INDENT } else { 0 };
        } else if !indentless {
            self.indent += BEST_INDENT;
        }
    }
    fn pop_indent(&mut self) {
        self.indent = self.indents.pop().unwrap_or(-1);
    }

    fn emit_node(&mut self, v: &Value, mapping_context: bool) -> Result<(), GoYamlError> {
        match v {
            Value::Null => self.emit_scalar("null", Style::Plain, false),
            Value::Bool(b) => {
                self.emit_scalar(if *b { "true" } else { "false" }, Style::Plain, false)
            }
            Value::Number(n) => self.emit_scalar(&number_text(n), Style::Plain, false),
            Value::String(s) => self.emit_string(s, false),
            Value::Array(items) if items.is_empty() => {
                self.write_indicator("[", true, true, false);
                self.write_indicator("]", false, false, false);
                Ok(())
            }
            Value::Object(map) if map.is_empty() => {
                self.write_indicator("{", true, true, false);
                self.write_indicator("}", false, false, false);
                Ok(())
            }
            Value::Array(items) => {
                let indentless = mapping_context && !self.indention;
                self.increase_indent(false, indentless);
                for item in items {
                    self.write_indent();
                    self.write_indicator("-", true, false, true);
                    self.emit_node(item, false)?;
                }
                self.pop_indent();
                Ok(())
            }
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| key_cmp(a.0, b.0));
                self.increase_indent(false, false);
                for (k, val) in entries {
                    self.write_indent();
                    // yaml_emitter_check_simple_key: at most 128 bytes on one line.
                    if k.len() <= 128 && !analyze(k).multiline {
                        self.emit_string(k, true)?;
                        self.write_indicator(":", false, false, false);
                    } else {
                        self.write_indicator("?", true, false, true);
                        self.emit_string(k, false)?;
                        self.write_indent();
                        self.write_indicator(":", true, false, true);
                    }
                    self.emit_node(val, true)?;
                }
                self.pop_indent();
                Ok(())
            }
        }
    }

    /// go-yaml's `stringv`: quote what would resolve to another type, literal for `\n`.
    fn emit_string(&mut self, s: &str, simple_key: bool) -> Result<(), GoYamlError> {
        if is_plain_token(s) && !needs_quotes(s) {
            // Fast path (base64 payloads, names, images): what write_plain does for a scalar
            // without spaces, breaks or indicators.
            if !self.whitespace {
                self.put(' ');
            }
            self.out.push_str(s);
            self.column += s.len();
            self.whitespace = false;
            self.indention = false;
            return Ok(());
        }
        if s.chars().any(rejected_by_reader) {
            return Err(GoYamlError::ControlCharacter);
        }
        let folded = fold_nel(s);
        let s = folded.as_ref();
        let style = if s.contains('\n') {
            Style::Literal
        } else if needs_quotes(s) {
            Style::Double
        } else {
            Style::Plain
        };
        self.emit_scalar(s, style, simple_key)
    }

    /// libyaml's `yaml_emitter_select_scalar_style` then the matching writer.
    fn emit_scalar(&mut self, s: &str, style: Style, simple_key: bool) -> Result<(), GoYamlError> {
        let a = analyze(s);
        let mut style = style;
        if simple_key && a.multiline {
            style = Style::Double;
        }
        if style == Style::Plain && (!a.block_plain_allowed || (s.is_empty() && simple_key)) {
            style = Style::Single;
        }
        if style == Style::Single && !a.single_quoted_allowed {
            style = Style::Double;
        }
        if style == Style::Literal && (!a.block_allowed || simple_key) {
            style = Style::Double;
        }
        self.increase_indent(true, false);
        let allow_breaks = !simple_key;
        match style {
            Style::Plain => self.write_plain(s, allow_breaks),
            Style::Single => self.write_single(s, allow_breaks),
            Style::Double => self.write_double(s, allow_breaks),
            Style::Literal => self.write_literal(s),
        }
        self.pop_indent();
        Ok(())
    }

    fn write_plain(&mut self, s: &str, allow_breaks: bool) {
        if !self.whitespace {
            self.put(' ');
        }
        let chars: Vec<char> = s.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && chars.get(i + 1) != Some(&' ')
                {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                self.put(c);
                self.indention = false;
                spaces = false;
            }
        }
        self.whitespace = false;
        self.indention = false;
    }

    fn write_single(&mut self, s: &str, allow_breaks: bool) {
        self.write_indicator("'", true, false, false);
        let chars: Vec<char> = s.chars().collect();
        let (mut spaces, mut breaks) = (false, false);
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i > 0
                    && i + 1 < chars.len()
                    && chars.get(i + 1) != Some(&' ')
                {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else if is_break_char(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if c == '\'' {
                    self.put('\'');
                }
                self.put(c);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.write_indicator("'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_double(&mut self, s: &str, allow_breaks: bool) {
        self.write_indicator("\"", true, false, false);
        let chars: Vec<char> = s.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if !is_printable(c) || c == '\u{FEFF}' || is_break_char(c) || c == '"' || c == '\\' {
                self.put('\\');
                match c {
                    '\0' => self.put('0'),
                    '\u{07}' => self.put('a'),
                    '\u{08}' => self.put('b'),
                    '\t' => self.put('t'),
                    '\n' => self.put('n'),
                    '\u{0B}' => self.put('v'),
                    '\u{0C}' => self.put('f'),
                    '\r' => self.put('r'),
                    '\u{1B}' => self.put('e'),
                    '"' => self.put('"'),
                    '\\' => self.put('\\'),
                    '\u{85}' => self.put('N'),
                    '\u{A0}' => self.put('_'),
                    '\u{2028}' => self.put('L'),
                    '\u{2029}' => self.put('P'),
                    _ => {
                        let v = c as u32;
                        let (ind, width) = if v <= 0xFF {
                            ('x', 2)
                        } else if v <= 0xFFFF {
                            ('u', 4)
                        } else {
                            ('U', 8)
                        };
                        self.put(ind);
                        for ch in format!("{v:0width$X}").chars() {
                            self.put(ch);
                        }
                    }
                }
                spaces = false;
            } else if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i > 0
                    && i + 1 < chars.len()
                {
                    self.write_indent();
                    if chars.get(i + 1) == Some(&' ') {
                        self.put('\\');
                    }
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                self.put(c);
                spaces = false;
            }
        }
        self.write_indicator("\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_literal(&mut self, s: &str) {
        self.write_indicator("|", true, false, false);
        let chars: Vec<char> = s.chars().collect();
        if chars.first().is_some_and(|&c| c == ' ' || is_break_char(c)) {
            self.write_indicator("2", false, false, false);
        }
        let chomp = match chars.as_slice() {
            [] => Some('-'),
            [.., last] if !is_break_char(*last) => Some('-'),
            [_] => Some('+'),
            [.., before, _] if is_break_char(*before) => Some('+'),
            _ => None,
        };
        if let Some(c) = chomp {
            self.write_indicator(&c.to_string(), false, false, false);
        }
        self.put_break();
        self.indention = true;
        self.whitespace = true;
        let mut breaks = true;
        for &c in &chars {
            if is_break_char(c) {
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.put(c);
                self.indention = false;
                breaks = false;
            }
        }
    }
}

/// Writes one JSON value as a YAML document the way `sigs.k8s.io/yaml.Marshal` does (no `---`
/// marker; ends with a newline).
pub fn to_yaml(v: &Value) -> Result<String, GoYamlError> {
    let mut e = Emitter {
        out: String::new(),
        column: 0,
        whitespace: true,
        indention: true,
        indent: -1,
        indents: Vec::new(),
    };
    e.emit_node(v, false)?;
    // yaml_emitter_emit_document_end: finish the last line.
    e.write_indent();
    Ok(e.out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_like_go() {
        assert_eq!(go_json_float(1.5e-7), "1.5e-7");
        assert_eq!(go_json_float(1e23), "1e+23");
        assert_eq!(go_json_float(1e21), "1e+21");
        assert_eq!(
            go_json_float(12345678901234567890.0),
            "12345678901234567000"
        );
        assert_eq!(go_json_float(-0.0), "-0");
        assert_eq!(go_json_float(0.1), "0.1");
        assert_eq!(format_g(1.5e-7), "1.5e-07");
        assert_eq!(format_g(1234567.5), "1.2345675e+06");
        assert_eq!(format_g(123456.5), "123456.5");
    }

    #[test]
    fn quoting_follows_resolve() {
        for s in [
            "1.0",
            "1e3",
            "true",
            "yes",
            "on",
            "~",
            "010",
            "0x1F",
            "0o17",
            "2021-01-01",
            "1:30",
            "+1",
            ".5",
            "1_000",
            ".inf",
            "",
        ] {
            assert!(needs_quotes(s), "{s}");
        }
        for s in [
            "1.3.0",
            "v1.2.3",
            "0.1.0-rc1",
            "NaN",
            "é",
            "-",
            "1e400",
            "12:30:45x",
        ] {
            assert!(!needs_quotes(s), "{s}");
        }
    }

    #[test]
    fn keys_in_natural_order() {
        let mut keys = vec!["a10", "a9", "b", "A", "_x", "a"];
        keys.sort_by(|a, b| key_cmp(a, b));
        assert_eq!(keys, vec!["_x", "A", "a", "a9", "a10", "b"]);
    }

    #[test]
    fn long_keys_are_complex_keys() {
        let key = "k".repeat(130);
        assert_eq!(
            to_yaml(&json!({ key.clone(): 1 })).unwrap(),
            format!("? {key}\n: 1\n")
        );
    }

    #[test]
    fn documents() {
        let v = json!({"b": [{"x": "- a", "y": "l1\nl2"}], "a": {}, "c": [], "d": "\u{1F600}", "e": 1.5e-7});
        assert_eq!(
            to_yaml(&v).unwrap(),
            "a: {}\nb:\n- x: '- a'\n  \"y\": |-\n    l1\n    l2\nc: []\nd: \"\\U0001F600\"\ne: 1.5e-07\n"
        );
        assert_eq!(
            to_yaml(&json!({"a": "x\u{7f}"})),
            Err(GoYamlError::ControlCharacter)
        );
    }
}
