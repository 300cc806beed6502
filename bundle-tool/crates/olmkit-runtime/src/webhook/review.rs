//! Answers one ConversionReview: from request body bytes to response status and body.
//!
//! Pure apart from logging, so the HTTP layer, golden-file tests and benchmarks share it.
//!
//! How bad input is answered (the API server reads only a 200 response with a ConversionReview
//! body; anything else fails the conversion with the HTTP status in its message):
//!
//! | input | answer |
//! |---|---|
//! | every object converts | 200, `result.status: Success`, `convertedObjects` in request order |
//! | an object cannot be converted (foreign group, other kind, unknown version, malformed, or too costly to parse within the memory budget) | 200, `result.status: Failure`, code 422, one message naming the first [`MAX_LISTED_FAILURES`] failing objects by index and namespace/name and counting the rest, one `details.causes` entry for each listed object; no `convertedObjects` |
//! | `desiredAPIVersion` is not a served version | 200, Failure, code 422 |
//! | a review whose `request.uid` can be read but whose `apiVersion`/`kind` is not a ConversionReview, or whose request is malformed | 200, Failure, code 400, the uid echoed |
//! | body not JSON, not an object, no `request`, no readable `request.uid` | 400 with a `Status` body |
//!
//! The HTTP layer adds 415 (Content-Type not JSON), 413 (body over the limit), 405 (method), 408
//! (timeout) and 429 (over the budgets, see [`super::admission`]).
//!
//! # Memory
//!
//! A review is read in one pass over its body, without building a `serde_json::Value` of any of
//! it: the envelope's few fields are picked out (anything else is skipped unread), and the
//! objects are taken one at a time as borrowed JSON text and converted one at a time. What a
//! review holds at its peak is therefore its body, its answer (written in [`CHUNK_BYTES`]
//! chunks, never reallocated; dropped at the first failing object, whose answer lists at most
//! [`MAX_LISTED_FAILURES`] objects) and the parsed form of the one object being converted,
//! whose size is estimated from its text before it is parsed ([`parse_cost`]). Callers give
//! [`answer_within`] a limit and a way to charge those bytes, so the total is known and bounded
//! before the memory is used: the body and twice its size for the answer are charged up front
//! ([`base_cost`]), an answer that outgrows that and the largest parsed object so far as they
//! come; an object whose parsed form could never fit is failed (named in the answer) rather
//! than parsed.

use std::borrow::Cow;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::conversion::{Converted, Converter};
use axum::body::Bytes;
use http::StatusCode;
use kube::core::conversion::ConversionResponse;
use kube::core::response::{StatusCause, StatusDetails};
use kube::core::{Status, TypeMeta};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::admission::Refused;

/// ConversionReview `apiVersion`s this webhook answers (the same shape in both).
pub const REVIEW_API_VERSIONS: [&str; 2] =
    ["apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"];
/// ConversionReview `kind`.
pub const REVIEW_KIND: &str = "ConversionReview";

/// How many failing objects the result lists (message and causes) before counting the rest.
pub const MAX_LISTED_FAILURES: usize = 10;
/// How many conversion warnings of one review are logged one by one before counting the rest.
const MAX_LOGGED_WARNINGS: usize = 10;
/// Size of the chunks an answer is written in.
pub const CHUNK_BYTES: usize = 64 * 1024;
/// Bytes charged per JSON value or member of an object about to be parsed: a
/// `serde_json::Value` (80 bytes with ordered maps) or a map entry (key, value, index), with
/// allocator overhead and the slack of a growing vector.
pub const VALUE_COST: usize = 128;

/// An HTTP answer: status and JSON body, in chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status code.
    pub status: StatusCode,
    /// The JSON body, in order.
    pub chunks: Vec<Bytes>,
}

impl Reply {
    fn whole(status: StatusCode, body: Vec<u8>) -> Self {
        Self {
            status,
            chunks: vec![Bytes::from(body)],
        }
    }

    /// The body in one piece (a copy when it is in several chunks).
    pub fn body(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.len());
        for chunk in &self.chunks {
            body.extend_from_slice(chunk);
        }
        body
    }

    /// Body length in bytes.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(Bytes::len).sum()
    }

    /// True for an empty body.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What happened, for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every object converted.
    Converted {
        /// Number of objects.
        objects: usize,
    },
    /// The review was answered with a Failure result.
    Failed {
        /// Why.
        message: String,
    },
    /// The request was rejected at the HTTP level.
    Rejected {
        /// Why.
        message: String,
    },
}

/// What a review of `body_len` bytes is charged before it is converted: its body, and twice its
/// size for its answer (converted objects are at most about that much larger than their
/// source; more is charged if an answer outgrows it).
pub fn base_cost(body_len: usize) -> usize {
    body_len.saturating_mul(3)
}

/// Objects up to this size are charged the most any text of their size can cost; larger ones
/// are scanned.
const SCANNED_ABOVE: usize = 16 * 1024;

/// Estimated bytes the parsed form of one object takes while it is converted: its text (strings
/// are copied) plus [`VALUE_COST`] per JSON value or member (counted as the `,`, `:`, `[` and
/// `{` outside strings). Objects of at most 16 KiB are not scanned: they are charged the most
/// any text of their size can hold (two values per three bytes, as in `[{},{},...]`).
pub fn parse_cost(text: &str) -> usize {
    let values = if text.len() <= SCANNED_ABOVE {
        (2 * text.len()).div_ceil(3)
    } else {
        values(text)
    };
    text.len().saturating_add(values.saturating_mul(VALUE_COST))
}

/// The `,`, `:`, `[` and `{` of a JSON text outside its strings.
fn values(text: &str) -> usize {
    let mut tokens = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in text.as_bytes() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else {
            match b {
                b'"' => in_string = true,
                b',' | b':' | b'[' | b'{' => tokens += 1,
                _ => {}
            }
        }
    }
    tokens
}

/// The resources the webhook converts, looked up by the group of the desired version and the
/// kind of each object.
pub type Converters = [std::sync::Arc<dyn Converter>];

/// The converter for objects of `kind` in the group of `desired_api_version`: the one of that
/// group and kind, else the first of that group (whose error then names the wrong kind), else
/// the first (whose error names the wrong group).
fn converter_for<'c>(
    converters: &'c Converters,
    desired_api_version: &str,
    kind: Option<&str>,
) -> Option<&'c dyn Converter> {
    let group = desired_api_version.split_once('/').map_or("", |(g, _)| g);
    let in_group = || converters.iter().filter(|c| c.group() == group);
    in_group()
        .find(|c| Some(c.kind()) == kind)
        .or_else(|| in_group().next())
        .or_else(|| converters.first())
        .map(|c| &**c)
}

/// The `kind` of an object given as JSON text, when it is a string.
fn kind_of(object: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Kind {
        kind: Option<String>,
    }
    if !crate::conversion::opens_an_object(object) {
        return None;
    }
    serde_json::from_str::<Kind>(object).ok()?.kind
}

/// Answers a ConversionReview request body, without a memory limit.
pub fn answer(body: &[u8], converters: &Converters) -> (Reply, Outcome) {
    match answer_within(body, converters, usize::MAX, &mut |_| Ok(())) {
        Ok(answered) => answered,
        Err(refused) => {
            let message = refused.to_string();
            (
                status_reply(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", &message),
                Outcome::Rejected { message },
            )
        }
    }
}

/// Answers a ConversionReview request body, holding at most `limit` bytes (see the module
/// header, "Memory"): `charge(total)` is called before more memory is used, with the total the
/// review then holds, starting at [`base_cost`]; an `Err` from it stops the review, which is
/// then not answered.
pub fn answer_within(
    body: &[u8],
    converters: &Converters,
    limit: usize,
    charge: &mut dyn FnMut(usize) -> Result<(), Refused>,
) -> Result<(Reply, Outcome), Refused> {
    let Ok(text) = std::str::from_utf8(body) else {
        return Ok(not_a_review(body));
    };
    // One pass over the body: the envelope's members, the request's, and the objects' list as
    // text (read again below, object by object).
    let top = {
        let mut de = serde_json::Deserializer::from_str(text);
        match de
            .deserialize_map(TopVisitor)
            .and_then(|top| de.end().map(|()| top))
        {
            Ok(top) => top,
            Err(_) => return Ok(not_a_review(body)),
        }
    };
    let Top {
        api_version,
        kind,
        request,
    } = top;
    let api_version = api_version.and_then(as_str);
    let kind = kind.and_then(as_str);
    let [uid, desired_api_version, objects] = match request {
        Request::Object(fields) => fields,
        Request::Missing | Request::Null | Request::NotObject => [None; 3],
    };
    let uid = uid.and_then(as_str).filter(|uid| !uid.is_empty());

    let known_version = api_version
        .as_deref()
        .filter(|v| REVIEW_API_VERSIONS.contains(v));
    let types = TypeMeta {
        api_version: known_version.unwrap_or(REVIEW_API_VERSIONS[0]).to_string(),
        kind: REVIEW_KIND.to_string(),
    };
    let shape_problem = match (known_version, kind.as_deref()) {
        (Some(_), Some(REVIEW_KIND)) => None,
        _ => Some(format!(
            "expected apiVersion apiextensions.k8s.io/v1 and kind ConversionReview, got apiVersion {} and kind {}",
            describe(api_version.as_deref()),
            describe(kind.as_deref())
        )),
    };
    let Some(uid) = uid else {
        let why = match request {
            Request::Missing | Request::Null => "ConversionReview has no request",
            Request::NotObject | Request::Object(_) => "ConversionReview request has no uid",
        };
        return Ok(reject(match shape_problem {
            Some(shape) => format!("{why}; {shape}"),
            None => why.to_string(),
        }));
    };
    let uid = uid.into_owned();
    if let Some(problem) = shape_problem {
        return Ok(fail_review(types, uid, bad_request(problem)));
    }
    let (desired_api_version, objects) = match request_values(desired_api_version, objects) {
        Ok(values) => values,
        Err(problem) => return Ok(fail_review(types, uid, bad_request(problem))),
    };
    let Some(first) = converter_for(converters, &desired_api_version, None) else {
        let message = "cannot convert: this webhook serves no resource".to_string();
        return Ok(fail_review(types, uid, invalid(message, Vec::new(), None)));
    };
    if let Err(e) = first.check_api_version(&desired_api_version) {
        let message = format!("cannot convert to desiredAPIVersion: {e}");
        return Ok(fail_review(types, uid, invalid(message, Vec::new(), None)));
    }
    let desired = desired_api_version.into_owned();
    let base = base_cost(body.len());
    charge(base)?;
    convert_objects(
        Review {
            types,
            uid,
            desired,
            converters,
            body_len: body.len(),
            limit,
        },
        objects,
        charge,
    )
}

/// The request's `desiredAPIVersion` and `objects`, checked to be a string and a list; what is
/// wrong with them otherwise.
fn request_values<'a>(
    desired_api_version: Option<&'a RawValue>,
    objects: Option<&'a RawValue>,
) -> Result<(Cow<'a, str>, Option<&'a RawValue>), String> {
    let desired_api_version = match desired_api_version.map(|v| (v, as_str(v))) {
        Some((_, Some(v))) => v,
        other => {
            return Err(format!(
                "request.desiredAPIVersion must be a string, got {}",
                json_type(other.map(|(raw, _)| raw))
            ));
        }
    };
    // Go decodes a missing or null list as empty; so does this.
    let objects = match objects {
        None => None,
        Some(list) if list.get() == "null" => None,
        Some(list) if list.get().starts_with('[') => Some(list),
        Some(other) => {
            return Err(format!(
                "request.objects must be a list, got {}",
                json_type(Some(other))
            ));
        }
    };
    Ok((desired_api_version, objects))
}

/// What [`convert_objects`] needs to know about the review.
struct Review<'c> {
    types: TypeMeta,
    uid: String,
    /// The desired `apiVersion`, checked to be served.
    desired: String,
    converters: &'c Converters,
    body_len: usize,
    limit: usize,
}

/// The answer being written while the objects are converted one at a time, and what that has
/// cost and found so far.
struct Conversion<'c> {
    converters: &'c Converters,
    desired: &'c str,
    limit: usize,
    /// [`base_cost`] of the body.
    base: usize,
    /// What the answer may allocate within the base.
    answer_allowance: usize,
    out: Chunked,
    total: usize,
    failures: usize,
    listed: Vec<(usize, String, String)>,
    warnings: Vec<(usize, String, String)>,
    more_warnings: usize,
    // The most charged so far beyond the base: the largest parsed object and the answer's
    // excess over its allowance.
    largest_parse: usize,
    charged: usize,
    refused: Option<Refused>,
}

impl Conversion<'_> {
    /// Charges for what the review holds now, if more than charged already; `Err` (the refusal
    /// kept) stops the review.
    fn charge_held(
        &mut self,
        charge: &mut dyn FnMut(usize) -> Result<(), Refused>,
    ) -> Result<(), ()> {
        let excess = self.out.allocated().saturating_sub(self.answer_allowance);
        let wanted = self.base + excess + self.largest_parse;
        if wanted > self.charged {
            if let Err(e) = charge(wanted) {
                self.refused = Some(e);
                return Err(());
            }
            self.charged = wanted;
        }
        Ok(())
    }

    /// Converts one object's text, unless holding it would exceed the limit.
    /// `describe`: whether a failure's message is wanted (only the first
    /// [`MAX_LISTED_FAILURES`] are listed; rendering the rest would only cost CPU, which a
    /// review of a million failing objects would otherwise spend).
    fn convert<'t>(
        &mut self,
        text: &'t str,
        describe: bool,
        charge: &mut dyn FnMut(usize) -> Result<(), Refused>,
    ) -> Result<Result<Converted<Cow<'t, str>>, String>, ()> {
        let cost = parse_cost(text);
        let excess = self.out.allocated().saturating_sub(self.answer_allowance);
        if self.base.saturating_add(excess).saturating_add(cost) > self.limit {
            if !describe {
                return Ok(Err(String::new()));
            }
            return Ok(Err(format!(
                "converting it would take about {} MiB (its text and {} JSON values), more than \
                 the webhook may hold ({} MiB, --webhook-max-inflight-bytes)",
                cost.div_ceil(1 << 20),
                cost.saturating_sub(text.len()) / VALUE_COST,
                self.limit >> 20
            )));
        }
        if cost > self.largest_parse {
            self.largest_parse = cost;
        }
        self.charge_held(charge)?;
        let kind = kind_of(text);
        Ok(
            match converter_for(self.converters, self.desired, kind.as_deref()) {
                Some(c) => c.convert_str(text, self.desired).map_err(|e| {
                    if describe {
                        without_position(e.to_string())
                    } else {
                        String::new()
                    }
                }),
                None => Err("this webhook serves no resource".to_string()),
            },
        )
    }

    /// Converts the next object of the list and adds it to the answer (or to the failures).
    fn object(
        &mut self,
        raw: &RawValue,
        charge: &mut dyn FnMut(usize) -> Result<(), Refused>,
    ) -> Result<(), ()> {
        let index = self.total;
        self.total += 1;
        let describe = self.listed.len() < MAX_LISTED_FAILURES;
        match self.convert(raw.get(), describe, charge)? {
            Ok(converted) => {
                if self.failures == 0 {
                    if index > 0 {
                        self.out.push(b",");
                    }
                    self.out.push(converted.object.as_bytes());
                    self.charge_held(charge)?;
                }
                for warning in converted.warnings {
                    if self.warnings.len() < MAX_LOGGED_WARNINGS {
                        self.warnings
                            .push((index, object_name(raw), warning.to_string()));
                    } else {
                        self.more_warnings += 1;
                    }
                }
            }
            Err(error) => {
                if self.failures == 0 {
                    // The answer will be a Failure: what was converted is not needed.
                    self.out = Chunked::new(0);
                }
                self.failures += 1;
                if self.listed.len() < MAX_LISTED_FAILURES {
                    self.listed.push((index, object_name(raw), error));
                }
            }
        }
        Ok(())
    }

    /// The Failure answer: the objects that could not be converted, the first few listed.
    fn failure(self, types: TypeMeta, uid: String) -> (Reply, Outcome) {
        let Conversion {
            converters,
            desired,
            total,
            failures,
            listed,
            ..
        } = self;
        let mut message = format!("cannot convert {failures} of {total} objects to {desired}: ");
        let listed_text: Vec<String> = listed
            .iter()
            .map(|(index, name, error)| format!("objects[{index}] ({name}): {error}"))
            .collect();
        message.push_str(&listed_text.join("; "));
        if failures > listed.len() {
            message.push_str(&format!("; and {} more", failures - listed.len()));
        }
        let causes = listed
            .into_iter()
            .map(|(index, name, error)| StatusCause {
                reason: "FieldValueInvalid".into(),
                message: format!("{name}: {error}"),
                field: format!("request.objects[{index}]"),
            })
            .collect();
        let owner = converter_for(converters, desired, None).map(|c| (c.group(), c.kind()));
        fail_review(types, uid, invalid(message, causes, owner))
    }
}

/// Converts the objects one at a time, writing the answer as it goes.
fn convert_objects(
    review: Review<'_>,
    objects: Option<&RawValue>,
    charge: &mut dyn FnMut(usize) -> Result<(), Refused>,
) -> Result<(Reply, Outcome), Refused> {
    let Review {
        types,
        uid,
        desired,
        converters,
        body_len,
        limit,
    } = review;
    let base = base_cost(body_len);
    let mut out = Chunked::new((body_len.saturating_mul(2) + 512).min(CHUNK_BYTES));
    out.push(b"{\"apiVersion\":");
    out.push_json(&types.api_version);
    out.push(b",\"kind\":\"ConversionReview\",\"response\":{\"uid\":");
    out.push_json(&uid);
    out.push(b",\"result\":{\"status\":\"Success\"},\"convertedObjects\":[");
    let mut conv = Conversion {
        converters,
        desired: &desired,
        limit,
        base,
        answer_allowance: base - body_len,
        out,
        total: 0,
        failures: 0,
        listed: Vec::new(),
        warnings: Vec::new(),
        more_warnings: 0,
        largest_parse: 0,
        charged: base,
        refused: None,
    };
    if let Some(list) = objects {
        let mut each = |raw: &RawValue| conv.object(raw, charge);
        let mut de = serde_json::Deserializer::from_str(list.get());
        // The list was read as valid JSON already; only the callback stops this early.
        let _ = de.deserialize_seq(EachObject(&mut each));
    }
    if let Some(refused) = conv.refused {
        return Err(refused);
    }
    if conv.failures > 0 {
        return Ok(conv.failure(types, uid));
    }
    conv.out.push(b"]}}");
    log_warnings(&uid, &conv.warnings, conv.more_warnings);
    Ok((
        Reply {
            status: StatusCode::OK,
            chunks: conv.out.finish(),
        },
        Outcome::Converted {
            objects: conv.total,
        },
    ))
}

fn log_warnings(uid: &str, warnings: &[(usize, String, String)], more: usize) {
    for (index, name, warning) in warnings {
        if let Some(suppressed) = LOG_WARNINGS.allow() {
            tracing::warn!(%uid, index, object = %name, suppressed, "{warning}");
        }
    }
    if more > 0
        && let Some(suppressed) = LOG_WARNINGS.allow()
    {
        tracing::warn!(%uid, suppressed, "and {more} more conversion warnings in this review");
    }
}

/// An answer written in chunks of at most [`CHUNK_BYTES`], none ever reallocated past it.
struct Chunked {
    done: Vec<Bytes>,
    current: Vec<u8>,
    first: usize,
}

impl Chunked {
    fn new(first: usize) -> Self {
        Self {
            done: Vec::new(),
            current: Vec::new(),
            first: first.clamp(64, CHUNK_BYTES),
        }
    }

    fn push(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.current.len() == CHUNK_BYTES {
                self.done
                    .push(Bytes::from(std::mem::take(&mut self.current)));
            }
            if self.current.len() == self.current.capacity() {
                let grown = (self.current.capacity() * 2).clamp(self.first, CHUNK_BYTES);
                self.current.reserve_exact(grown - self.current.len());
            }
            let room = self.current.capacity().min(CHUNK_BYTES) - self.current.len();
            let take = room.min(data.len());
            self.current.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
    }

    fn push_json(&mut self, text: &str) {
        match serde_json::to_string(text) {
            Ok(quoted) => self.push(quoted.as_bytes()),
            // Strings always encode.
            Err(_) => self.push(b"\"\""),
        }
    }

    /// Bytes allocated so far.
    fn allocated(&self) -> usize {
        self.done.len() * CHUNK_BYTES + self.current.capacity()
    }

    fn finish(mut self) -> Vec<Bytes> {
        if !self.current.is_empty() {
            self.done.push(Bytes::from(self.current));
        }
        self.done
    }
}

/// Feeds each element of a JSON list, as borrowed text, to a callback until it says stop.
struct EachObject<'f, 'de>(&'f mut dyn FnMut(&'de RawValue) -> Result<(), ()>);

impl<'de> Visitor<'de> for EachObject<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(raw) = seq.next_element::<&'de RawValue>()? {
            if (self.0)(raw).is_err() {
                return Err(serde::de::Error::custom("stopped"));
            }
        }
        Ok(())
    }
}

/// The values of the named members of a JSON object, each as borrowed text (the last of
/// duplicates, as Go's decoder and `serde_json::Value` keep); other members are skipped unread.
fn members<'a, const N: usize>(
    text: &'a str,
    names: [&str; N],
) -> Result<[Option<&'a RawValue>; N], serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let found = de.deserialize_map(Members(&names))?;
    de.end()?;
    Ok(found)
}

/// The members of a review that matter, read in one pass.
struct Top<'a> {
    api_version: Option<&'a RawValue>,
    kind: Option<&'a RawValue>,
    request: Request<'a>,
}

/// `request` of a review.
#[derive(Clone, Copy)]
enum Request<'a> {
    Missing,
    Null,
    NotObject,
    /// `uid`, `desiredAPIVersion`, `objects`.
    Object([Option<&'a RawValue>; 3]),
}

const REQUEST_MEMBERS: [&str; 3] = ["uid", "desiredAPIVersion", "objects"];

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Top<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut top = Top {
            api_version: None,
            kind: None,
            request: Request::Missing,
        };
        while let Some(key) = map.next_key_seed(Key)? {
            match key.as_ref() {
                "apiVersion" => top.api_version = Some(map.next_value()?),
                "kind" => top.kind = Some(map.next_value()?),
                "request" => top.request = map.next_value_seed(RequestSeed)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(top)
    }
}

/// Reads `request`: its members when it is an object, what it is otherwise.
struct RequestSeed;

impl<'de> DeserializeSeed<'de> for RequestSeed {
    type Value = Request<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed {
    type Value = Request<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Members(&REQUEST_MEMBERS)
            .visit_map(map)
            .map(Request::Object)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Request::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Request::NotObject)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Request::NotObject)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Request::NotObject)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Request::NotObject)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Request::NotObject)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Request::NotObject)
    }
}

struct Members<'n, const N: usize>(&'n [&'n str; N]);

impl<'de, const N: usize> Visitor<'de> for Members<'_, N> {
    type Value = [Option<&'de RawValue>; N];

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = [None; N];
        while let Some(key) = map.next_key_seed(Key)? {
            match self.0.iter().position(|name| *name == key) {
                Some(i) => found[i] = Some(map.next_value::<&'de RawValue>()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
}

/// A map key, borrowed unless it has escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }
}

/// The string a JSON value is, if it is one.
fn as_str(raw: &RawValue) -> Option<Cow<'_, str>> {
    if !raw.get().starts_with('"') {
        return None;
    }
    let mut de = serde_json::Deserializer::from_str(raw.get());
    Key.deserialize(&mut de).ok()
}

/// Why a body that is not a readable JSON object is refused.
fn not_a_review(body: &[u8]) -> (Reply, Outcome) {
    match (
        serde_json::from_slice::<IgnoredAny>(body),
        std::str::from_utf8(body),
    ) {
        (Err(e), _) => reject(format!("request body is not JSON: {e}")),
        (Ok(_), Err(e)) => reject(format!(
            "request body is not JSON: invalid UTF-8 at byte {}",
            e.valid_up_to()
        )),
        (Ok(_), Ok(_)) => reject("request body is not a JSON object".into()),
    }
}

/// `namespace/name`, `name`, or a placeholder, read leniently from a raw object.
fn object_name(object: &RawValue) -> String {
    let field = |raw: Option<&RawValue>| raw.and_then(as_str).map(Cow::into_owned);
    let [metadata] = if object.get().starts_with('{') {
        members(object.get(), ["metadata"]).unwrap_or([None])
    } else {
        [None]
    };
    let [namespace, name, generate_name] = metadata
        .filter(|m| m.get().starts_with('{'))
        .and_then(|m| members(m.get(), ["namespace", "name", "generateName"]).ok())
        .unwrap_or([None; 3]);
    match (field(namespace), field(name).or(field(generate_name))) {
        (Some(ns), Some(name)) => format!("{ns}/{name}"),
        (None, Some(name)) => name,
        (Some(ns), None) => format!("{ns}/<unnamed>"),
        (None, None) => "<unnamed>".to_string(),
    }
}

/// A parse error's message without serde_json's " at line L column C": the position is inside
/// one object's text, not in the request, and would mislead.
fn without_position(mut message: String) -> String {
    if let Some(at) = message.rfind(" at line ") {
        let rest = &message[at + " at line ".len()..];
        let is_position = rest.split_once(" column ").is_some_and(|(line, column)| {
            !line.is_empty()
                && !column.is_empty()
                && line.bytes().all(|b| b.is_ascii_digit())
                && column.bytes().all(|b| b.is_ascii_digit())
        });
        if is_position {
            message.truncate(at);
        }
    }
    message
}

/// The JSON type of a value, from its first character.
fn json_type(value: Option<&RawValue>) -> &'static str {
    match value.and_then(|v| v.get().bytes().next()) {
        None => "nothing",
        Some(b'n') => "null",
        Some(b't' | b'f') => "a boolean",
        Some(b'"') => "a string",
        Some(b'[') => "a list",
        Some(b'{') => "an object",
        Some(_) => "a number",
    }
}

fn describe(value: Option<&str>) -> String {
    value.map_or_else(|| "<missing>".to_string(), |v| format!("{v:?}"))
}

fn bad_request(message: String) -> Status {
    Status::failure(&message, "BadRequest").with_code(400)
}

fn invalid(message: String, causes: Vec<StatusCause>, owner: Option<(&str, &str)>) -> Status {
    let status = Status::failure(&message, "Invalid").with_code(422);
    if causes.is_empty() {
        status
    } else {
        status.with_details(StatusDetails {
            name: String::new(),
            group: owner.map_or_else(String::new, |(g, _)| g.to_string()),
            kind: owner.map_or_else(String::new, |(_, k)| k.to_string()),
            uid: String::new(),
            causes,
            retry_after_seconds: 0,
        })
    }
}

fn fail_review(types: TypeMeta, uid: String, status: Status) -> (Reply, Outcome) {
    if let Some(suppressed) = LOG_FAILURES.allow() {
        tracing::warn!(%uid, suppressed, "conversion failed: {}", status.message);
    }
    let message = status.message.clone();
    let response = ConversionResponse {
        types: Some(types),
        uid,
        result: status,
        converted_objects: Vec::new(),
    };
    (
        encode(StatusCode::OK, &response.into_review()),
        Outcome::Failed { message },
    )
}

/// A 400 with a `Status` body, when there is no review to answer.
fn reject(message: String) -> (Reply, Outcome) {
    if let Some(suppressed) = LOG_FAILURES.allow() {
        tracing::warn!(suppressed, "rejected request: {message}");
    }
    (
        status_reply(StatusCode::BAD_REQUEST, "BadRequest", &message),
        Outcome::Rejected { message },
    )
}

/// A `meta/v1` Status body for an HTTP-level error.
pub fn status_reply(status: StatusCode, reason: &str, message: &str) -> Reply {
    let mut body = Map::new();
    body.insert("apiVersion".into(), json!("v1"));
    body.insert("kind".into(), json!("Status"));
    body.insert("status".into(), json!("Failure"));
    body.insert("message".into(), json!(message));
    body.insert("reason".into(), json!(reason));
    body.insert("code".into(), json!(status.as_u16()));
    encode(status, &Value::Object(body))
}

fn encode(status: StatusCode, body: &impl serde::Serialize) -> Reply {
    match serde_json::to_vec(body) {
        Ok(body) => Reply::whole(status, body),
        // Values built here always encode; answer 500 rather than panic if that ever changes.
        Err(e) => {
            tracing::error!("cannot encode the response: {e}");
            Reply::whole(
                StatusCode::INTERNAL_SERVER_ERROR,
                br#"{"apiVersion":"v1","kind":"Status","status":"Failure","message":"cannot encode the response","code":500}"#.to_vec(),
            )
        }
    }
}

/// At most [`LogLimiter::PER_WINDOW`] lines per [`LogLimiter::WINDOW`] for one kind of
/// message, so a client sending failing reviews (or a flood refused with 429) cannot fill the
/// logs; each line that goes out says how many were left out before it.
#[derive(Debug)]
pub(crate) struct LogLimiter {
    state: Mutex<Option<(Instant, u32, u64)>>,
}

/// Reviews answered with a Failure, and bodies that are not reviews.
static LOG_FAILURES: LogLimiter = LogLimiter::new();
/// Requests refused by the HTTP layer (429, 413, 415, 431, 408).
pub(crate) static LOG_REJECTIONS: LogLimiter = LogLimiter::new();
/// Conversion warnings.
static LOG_WARNINGS: LogLimiter = LogLimiter::new();

impl LogLimiter {
    const WINDOW: Duration = Duration::from_secs(10);
    const PER_WINDOW: u32 = 10;

    pub(crate) const fn new() -> Self {
        Self {
            state: Mutex::new(None),
        }
    }

    /// `Some(lines left out since the last one)` when a line may go out now.
    pub(crate) fn allow(&self) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let (start, lines, suppressed) = state.get_or_insert((now, 0, 0));
        if now.duration_since(*start) >= Self::WINDOW {
            *start = now;
            *lines = 0;
        }
        if *lines < Self::PER_WINDOW {
            *lines += 1;
            Some(std::mem::take(suppressed))
        } else {
            *suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn widgets() -> Vec<std::sync::Arc<dyn Converter>> {
        crate::testing::widget_converters()
    }

    fn review(objects: &str) -> Vec<u8> {
        format!(
            r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{{"uid":"u","desiredAPIVersion":"demo.example.com/v1","objects":[{objects}]}}}}"#
        )
        .into_bytes()
    }

    const GOOD: &str = r#"{"apiVersion":"demo.example.com/v1alpha1","kind":"Widget","metadata":{"name":"a","namespace":"ns"},"spec":{"size":2}}"#;

    fn answer_json(body: &[u8]) -> Value {
        serde_json::from_slice(&answer(body, &widgets()).0.body()).unwrap()
    }

    #[test]
    fn parse_cost_counts_values_outside_strings() {
        // Small objects: the most their size allows.
        assert_eq!(parse_cost("[0,0,0]"), 7 + 5 * VALUE_COST);
        let dense = format!("[{}]", vec!["{}"; 10_000].join(","));
        let tokens = 1 + 10_000 + 9_999;
        assert_eq!(parse_cost(&dense), dense.len() + tokens * VALUE_COST);
        // Which is at least as much as any small text costs.
        for small in [
            &dense[..SCANNED_ABOVE],
            &dense[..SCANNED_ABOVE - 1],
            "[[],[]]",
        ] {
            assert!(parse_cost(small) >= small.len() + values(small) * VALUE_COST);
        }
        let padded = format!(r#"{{"a,:[{{":"\",{{"{}}}"#, " ".repeat(SCANNED_ABOVE));
        assert_eq!(parse_cost(&padded), padded.len() + 2 * VALUE_COST);
    }

    #[test]
    fn many_failures_list_ten_and_count_the_rest() {
        let bad = r#"{"apiVersion":"demo.example.com/v9","kind":"Widget","metadata":{"name":"x"}}"#;
        let objects = vec![bad; 500].join(",");
        let (reply, outcome) = answer(&review(&format!("{GOOD},{objects}")), &widgets());
        assert!(reply.len() < 8 * 1024, "{} bytes", reply.len());
        let json: Value = serde_json::from_slice(&reply.body()).unwrap();
        let result = &json["response"]["result"];
        assert_eq!(result["code"], 422);
        assert_eq!(
            result["details"]["causes"].as_array().unwrap().len(),
            MAX_LISTED_FAILURES
        );
        let message = result["message"].as_str().unwrap();
        assert!(
            message.starts_with("cannot convert 500 of 501 objects"),
            "{message}"
        );
        assert!(message.ends_with("; and 490 more"), "{message}");
        assert!(matches!(outcome, Outcome::Failed { .. }));
    }

    #[test]
    fn objects_that_are_not_objects_fail_one_by_one() {
        let json = answer_json(&review("0,[],\"x\",null"));
        let message = json["response"]["result"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("cannot convert 4 of 4 objects"),
            "{message}"
        );
        assert!(message.contains("objects[3] (<unnamed>)"), "{message}");
    }

    #[test]
    fn answers_are_written_in_bounded_chunks() {
        let objects = vec![GOOD; 2000].join(",");
        let (reply, outcome) = answer(&review(&objects), &widgets());
        assert_eq!(outcome, Outcome::Converted { objects: 2000 });
        assert!(reply.chunks.len() > 1);
        assert!(reply.chunks.iter().all(|c| c.len() <= CHUNK_BYTES));
        let json: Value = serde_json::from_slice(&reply.body()).unwrap();
        assert_eq!(
            json["response"]["convertedObjects"]
                .as_array()
                .unwrap()
                .len(),
            2000
        );
    }

    #[test]
    fn charges_cover_body_answer_and_the_largest_parse() {
        let objects = vec![GOOD; 2000].join(",");
        let body = review(&objects);
        let mut charges = Vec::new();
        let (reply, _) = answer_within(&body, &widgets(), usize::MAX, &mut |total| {
            charges.push(total);
            Ok(())
        })
        .unwrap();
        assert_eq!(charges[0], base_cost(body.len()));
        assert!(charges.windows(2).all(|w| w[0] < w[1]), "{charges:?}");
        let last = *charges.last().unwrap();
        assert!(
            last >= body.len() + reply.len() + parse_cost(GOOD),
            "{last}"
        );
    }

    #[test]
    fn an_object_too_costly_to_parse_fails_without_being_parsed() {
        let dense = format!(
            r#"{{"apiVersion":"demo.example.com/v1alpha1","kind":"Widget","metadata":{{"name":"dense","managedFields":[{{"fieldsV1":{{"f:a":[{}]}}}}]}},"spec":{{"size":1}}}}"#,
            vec!["0"; 100_000].join(",")
        );
        let body = review(&format!("{GOOD},{dense}"));
        let limit = base_cost(body.len()) + 1024 * 1024;
        let (reply, _) = answer_within(&body, &widgets(), limit, &mut |total| {
            assert!(total <= limit);
            Ok(())
        })
        .unwrap();
        let json: Value = serde_json::from_slice(&reply.body()).unwrap();
        let message = json["response"]["result"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("cannot convert 1 of 2 objects")
                && message.contains("objects[1] (dense): converting it would take about 13 MiB")
                && message.contains("--webhook-max-inflight-bytes"),
            "{message}"
        );
        // Without the limit it converts.
        let json = answer_json(&body);
        assert_eq!(json["response"]["result"]["status"], "Success");
    }

    #[test]
    fn a_refused_charge_stops_the_review() {
        let objects = vec![GOOD; 100].join(",");
        let body = review(&objects);
        let refused = Refused::Bytes {
            wanted: 1,
            limit: 1,
        };
        let mut calls = 0;
        let result = answer_within(&body, &widgets(), usize::MAX, &mut |_| {
            calls += 1;
            if calls > 1 {
                Err(refused.clone())
            } else {
                Ok(())
            }
        });
        assert_eq!(result.unwrap_err(), refused);
    }

    #[test]
    fn duplicate_members_keep_the_last_and_unknown_ones_are_skipped() {
        let body = format!(
            r#"{{"apiVersion":"x","junk":[1,2,{{"a":3}}],"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{{"uid":"u1","uid":"u2","desiredAPIVersion":"demo.example.com/v1","objects":[{GOOD}]}}}}"#
        );
        let json = answer_json(body.as_bytes());
        assert_eq!(json["response"]["uid"], "u2");
        assert_eq!(json["response"]["result"]["status"], "Success");
    }

    #[test]
    fn escaped_names_are_read() {
        let object = r#"{"apiVersion":"demo.example.com/v9","kind":"Widget","metadata":{"na\u006de":"caf\u00e9","namespace":"n"}}"#;
        let json = answer_json(&review(object));
        let message = json["response"]["result"]["message"].as_str().unwrap();
        assert!(message.contains("objects[0] (n/café)"), "{message}");
    }

    #[test]
    fn log_lines_are_limited_per_window() {
        let limiter = LogLimiter::new();
        for _ in 0..LogLimiter::PER_WINDOW {
            assert_eq!(limiter.allow(), Some(0));
        }
        assert_eq!(limiter.allow(), None);
        assert_eq!(limiter.allow(), None);
        let mut state = limiter.state.lock().unwrap();
        state.as_mut().unwrap().0 -= LogLimiter::WINDOW;
        drop(state);
        assert_eq!(limiter.allow(), Some(2));
    }
}
