//! `opm init`: one `olm.package` blob from a package name, a default channel, a description
//! file and an icon file.
//!
//! Mirrors operator-registry's `alpha/action.Init.Run` (opm v1.73): the description is the
//! file's bytes as a string, the icon the file's bytes with the media type
//! `github.com/h2non/filetype` (v1.1.3) detects from its magic number, refused unless it is an
//! image type. `cmd/opm/init` then writes `DeclarativeConfig{Packages: [pkg]}` with
//! `declcfg.WriteJSON` or `WriteYAML`, which [`crate::declcfg::write`] reproduces.

use crate::declcfg::{DeclarativeConfig, Icon, Package};
use base64::Engine as _;
use thiserror::Error;

/// Why the package blob could not be made (opm's messages).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum InitError {
    /// The icon file is empty (filetype's `ErrEmptyBuffer`).
    #[error("detect icon mediatype: Empty buffer")]
    EmptyIcon,
    /// The icon is not an image type filetype knows.
    #[error("detected invalid type {0:?}: not an image")]
    NotAnImage(String),
}

/// What `opm init` takes.
#[derive(Clone, Debug, Default)]
pub struct Init {
    /// The package name (`opm init <packageName>`).
    pub package: String,
    /// `--default-channel`.
    pub default_channel: String,
    /// The bytes of `--description FILE`.
    pub description: Option<Vec<u8>>,
    /// The bytes of `--icon FILE`.
    pub icon: Option<Vec<u8>>,
}

impl Init {
    /// The `olm.package` blob (operator-registry `alpha/action.Init.Run`).
    pub fn run(&self) -> Result<Package, InitError> {
        let icon = match &self.icon {
            None => None,
            Some(data) => {
                let mediatype = image_media_type(data)?;
                Some(Icon {
                    base64data: base64::engine::general_purpose::STANDARD.encode(data),
                    mediatype: mediatype.to_string(),
                })
            }
        };
        Ok(Package {
            schema: crate::declcfg::SCHEMA_PACKAGE.to_string(),
            name: self.package.clone(),
            default_channel: self.default_channel.clone(),
            icon,
            description: self
                .description
                .as_deref()
                .map(go_string)
                .unwrap_or_default(),
            properties: Vec::new(),
        })
    }

    /// The catalog `cmd/opm/init` writes: the one package.
    pub fn config(&self) -> Result<DeclarativeConfig, InitError> {
        Ok(DeclarativeConfig {
            packages: vec![self.run()?],
            ..Default::default()
        })
    }
}

/// Bytes as text the way Go's `encoding/json` reads a `string(bytes)`: every byte that does not
/// start a valid UTF-8 sequence becomes U+FFFD on its own (`utf8.DecodeRuneInString` returns
/// `(RuneError, 1)`), unlike Rust's `from_utf8_lossy`, which replaces maximal invalid runs.
/// (Go's JSON writes that rune as the escape `\ufffd`, ours as the character itself.)
pub fn go_string(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                break;
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                // `valid` is valid UTF-8 by construction.
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                out.push('\u{FFFD}');
                rest = after.get(1..).unwrap_or_default();
            }
        }
    }
    out
}

/// The image media type `github.com/h2non/filetype` v1.1.3 `Match` finds from the first bytes
/// (its `matchers/image.go`), or opm's refusal.
pub fn image_media_type(data: &[u8]) -> Result<&'static str, InitError> {
    if data.is_empty() {
        return Err(InitError::EmptyIcon);
    }
    let b = |i: usize| data.get(i).copied().unwrap_or(0);
    let starts = |m: &[u8]| data.starts_with(m);
    let tiff_magic = starts(&[0x49, 0x49, 0x2A, 0x00]) || starts(&[0x4D, 0x4D, 0x00, 0x2A]);
    let cr2 = tiff_magic && b(8) == 0x43 && b(9) == 0x52;
    let ftyp = data.get(4..8) == Some(b"ftyp");
    let brand = data.get(8..12).unwrap_or_default();
    let found = if starts(&[0xFF, 0xD8, 0xFF]) {
        "image/jpeg"
    } else if starts(&[
        0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20, 0x0D, 0x0A, 0x87, 0x0A,
    ]) {
        "image/jp2"
    } else if starts(&[0x89, 0x50, 0x4E, 0x47]) {
        "image/png"
    } else if starts(&[0x47, 0x49, 0x46]) {
        "image/gif"
    } else if data.get(8..12) == Some(b"WEBP") {
        "image/webp"
    } else if cr2 {
        "image/x-canon-cr2"
    } else if tiff_magic {
        "image/tiff"
    } else if starts(&[0x42, 0x4D]) {
        "image/bmp"
    } else if starts(&[0x49, 0x49, 0xBC]) {
        "image/vnd.ms-photo"
    } else if starts(b"8BPS") {
        "image/vnd.adobe.photoshop"
    } else if starts(&[0x00, 0x00, 0x01, 0x00]) {
        "image/vnd.microsoft.icon"
    } else if ftyp && (brand == b"avif" || brand == b"avis") {
        "image/avif"
    } else if ftyp
        && matches!(
            brand,
            b"heic" | b"heix" | b"hevc" | b"hevx" | b"mif1" | b"msf1"
        )
    {
        "image/heif"
    } else if starts(&[0x41, 0x43, 0x31, 0x30]) {
        "image/vnd.dwg"
    } else if starts(&[0x76, 0x2F, 0x31, 0x01]) {
        "image/x-exr"
    } else if is_svg(data) {
        // Registered by operator-registry itself (`alpha/model` `init`: go-is-svg's `Is`).
        "image/svg+xml"
    } else {
        // filetype's `Unknown` (text formats such as SVG have no magic number) and every
        // non-image type are refused alike; opm names a known non-image MIME type, which only
        // changes the quoted name in the message.
        return Err(InitError::NotAnImage(non_image_mime(data).to_string()));
    };
    Ok(found)
}

/// `github.com/h2non/go-is-svg` `Is` (the revision operator-registry pins): not binary (no
/// byte up to 8 among the first 24 of a buffer of 24 bytes or more), and, with HTML comments
/// removed, the whole text matching
/// `(?i)^\s*(?:<\?xml[^>]*>\s*)?(?:<!doctype svg[^>]*>\s*)?<svg[^>]*>[^*]*<\/svg>\s*$`
/// (so no `*` may appear after the opening tag).
pub fn is_svg(buf: &[u8]) -> bool {
    if buf.len() >= 24 && buf.iter().take(24).any(|&b| b <= 8) {
        return false;
    }
    // `(?i)<!--([\s\S]*?)-->` replaced by nothing, leftmost first.
    let mut text = Vec::with_capacity(buf.len());
    let mut rest = buf;
    while let Some(start) = find(rest, b"<!--") {
        let after = rest.get(start + 4..).unwrap_or_default();
        let Some(end) = find(after, b"-->") else {
            break;
        };
        text.extend_from_slice(rest.get(..start).unwrap_or_default());
        rest = after.get(end + 3..).unwrap_or_default();
    }
    text.extend_from_slice(rest);
    // RE2's \s: [\t\n\f\r ].
    let space = |b: &u8| matches!(b, b'\t' | b'\n' | 0x0C | b'\r' | b' ');
    let skip_space = |t: &[u8]| -> usize { t.iter().take_while(|b| space(b)).count() };
    let starts_ci = |t: &[u8], lit: &[u8]| {
        t.len() >= lit.len() && t.iter().zip(lit).all(|(a, b)| a.eq_ignore_ascii_case(b))
    };
    // `<lit[^>]*>`: the length through the first `>`.
    let tag = |t: &[u8], lit: &[u8]| -> Option<usize> {
        if !starts_ci(t, lit) {
            return None;
        }
        let close = t.iter().skip(lit.len()).position(|&b| b == b'>')?;
        Some(lit.len() + close + 1)
    };
    let mut t: &[u8] = &text;
    t = t.get(skip_space(t)..).unwrap_or_default();
    if let Some(n) = tag(t, b"<?xml") {
        t = t.get(n..).unwrap_or_default();
        t = t.get(skip_space(t)..).unwrap_or_default();
    }
    if let Some(n) = tag(t, b"<!doctype svg") {
        t = t.get(n..).unwrap_or_default();
        t = t.get(skip_space(t)..).unwrap_or_default();
    }
    let Some(n) = tag(t, b"<svg") else {
        return false;
    };
    let body = t.get(n..).unwrap_or_default();
    // `[^*]*<\/svg>\s*$`: trailing whitespace, then `</svg>`, with no `*` before it.
    let trimmed = body.len() - body.iter().rev().take_while(|b| space(b)).count();
    let body = body.get(..trimmed).unwrap_or_default();
    body.len() >= 6
        && starts_ci(body.get(body.len() - 6..).unwrap_or_default(), b"</svg>")
        && !body.contains(&b'*')
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A few non-image types filetype knows, for opm's message.
fn non_image_mime(data: &[u8]) -> &'static str {
    if data.starts_with(b"%PDF") {
        "application/pdf"
    } else if data.starts_with(&[0x50, 0x4B, 0x03, 0x04]) {
        "application/zip"
    } else if data.starts_with(&[0x1F, 0x8B, 0x08]) {
        "application/gzip"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declcfg::{WriteFormat, render_config};

    const PNG_1X1: &[u8] = &[
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44,
        0x52,
    ];

    #[test]
    fn package_blob_as_opm_init_writes_it() {
        let init = Init {
            package: "memcached-operator".into(),
            default_channel: "stable".into(),
            description: Some(b"# Memcached\n\nA <cache> & more.\n".to_vec()),
            icon: Some(PNG_1X1.to_vec()),
        };
        let json = render_config(&init.config().unwrap(), WriteFormat::Json).unwrap();
        assert_eq!(
            json,
            "{\n    \"schema\": \"olm.package\",\n    \"name\": \"memcached-operator\",\n    \"defaultChannel\": \"stable\",\n    \"icon\": {\n        \"base64data\": \"iVBORw0KGgoAAAANSUhEUg==\",\n        \"mediatype\": \"image/png\"\n    },\n    \"description\": \"# Memcached\\n\\nA <cache> & more.\\n\"\n}\n"
        );
    }

    #[test]
    fn no_flags_keep_an_empty_default_channel() {
        let init = Init {
            package: "p".into(),
            ..Default::default()
        };
        let json = render_config(&init.config().unwrap(), WriteFormat::Json).unwrap();
        assert_eq!(
            json,
            "{\n    \"schema\": \"olm.package\",\n    \"name\": \"p\",\n    \"defaultChannel\": \"\"\n}\n"
        );
    }

    #[test]
    fn icons_are_typed_by_content_as_opm_does() {
        assert_eq!(
            image_media_type(&[0xFF, 0xD8, 0xFF, 0xE0]),
            Ok("image/jpeg")
        );
        assert_eq!(image_media_type(b"GIF89a"), Ok("image/gif"));
        assert_eq!(image_media_type(b"RIFF\0\0\0\0WEBPVP8 "), Ok("image/webp"));
        assert_eq!(
            image_media_type(&[0, 0, 1, 0, 1]),
            Ok("image/vnd.microsoft.icon")
        );
        // operator-registry's own test icon, and go-is-svg's rules.
        assert_eq!(
            image_media_type(
                br#"<svg viewBox="0 0 100 100"><circle cx="25" cy="25" r="25"/></svg>"#
            ),
            Ok("image/svg+xml")
        );
        assert!(is_svg(
            b"<?xml version=\"1.0\"?>\n<!-- c * -->\n<SVG a='b'></svg>\n"
        ));
        // A self-closing root has no `</svg>`, and a `*` after the opening tag fails the
        // pattern: opm refuses both.
        assert_eq!(
            image_media_type(b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>")
                .unwrap_err()
                .to_string(),
            "detected invalid type \"\": not an image"
        );
        assert!(!is_svg(b"<svg><style>*{}</style></svg>"));
        assert_eq!(
            image_media_type(b"foo").unwrap_err().to_string(),
            "detected invalid type \"\": not an image"
        );
        assert_eq!(
            image_media_type(b"%PDF-1.4").unwrap_err().to_string(),
            "detected invalid type \"application/pdf\": not an image"
        );
        assert_eq!(image_media_type(b""), Err(InitError::EmptyIcon));
    }

    #[test]
    fn invalid_utf8_is_replaced_byte_by_byte_like_go() {
        // A truncated 3-byte sequence: Go writes two U+FFFD, from_utf8_lossy one.
        assert_eq!(go_string(b"a\xE2\x82b"), "a\u{FFFD}\u{FFFD}b");
        assert_eq!(go_string("é".as_bytes()), "é");
    }
}
