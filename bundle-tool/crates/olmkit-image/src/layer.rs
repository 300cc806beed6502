//! Deterministic layer blobs: a [`FileTree`] becomes a gzip-compressed tar.
//!
//! Same tree in, same bytes out, on any machine: entries in sorted order with their parents
//! first, one fixed mtime (from `SOURCE_DATE_EPOCH`), numeric owners with empty user/group
//! names, no extended attributes, ustar headers (GNU long-name records only for paths over the
//! ustar limits), and a gzip stream with a fixed header (no file name, mtime 0, OS "unknown")
//! at a fixed compression level. The tar is hashed while it is compressed, giving the layer's
//! `diff_id` (sha256 of the uncompressed tar) without a second pass.

use crate::digest::{Digest, Hasher};
use crate::error::BuildImageError;
use crate::tree::{EntryKind, FileTree};
use flate2::write::GzEncoder;
use std::io::Write;

/// Media type of gzip-compressed OCI layers.
pub const MEDIA_TYPE_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// Compression level of every layer. Changing it changes every digest: it is part of the
/// format, not a tuning knob.
pub const GZIP_LEVEL: u32 = 6;

/// A content-addressed blob with its media type.
#[derive(Clone, PartialEq, Eq)]
pub struct Blob {
    /// Media type of the blob as referenced from a manifest.
    pub media_type: String,
    /// sha256 of `data`.
    pub digest: Digest,
    /// The bytes.
    pub data: Vec<u8>,
}

impl Blob {
    /// A blob holding `data`.
    pub fn new(media_type: impl Into<String>, data: Vec<u8>) -> Self {
        Self {
            media_type: media_type.into(),
            digest: Digest::of(&data),
            data,
        }
    }
    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.data.len() as u64
    }
}

impl std::fmt::Debug for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blob")
            .field("media_type", &self.media_type)
            .field("digest", &self.digest)
            .field("size", &self.data.len())
            .finish()
    }
}

/// A built layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layer {
    /// The compressed tar.
    pub blob: Blob,
    /// sha256 of the uncompressed tar (the config's `rootfs.diff_ids` entry).
    pub diff_id: Digest,
    /// Size of the uncompressed tar.
    pub uncompressed_size: u64,
}

/// Feeds the uncompressed tar both to the diff_id hasher and to the gzip encoder.
struct TeeWriter {
    hasher: Hasher,
    gz: GzEncoder<Vec<u8>>,
    written: u64,
}

impl Write for TeeWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.gz.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.gz.flush()
    }
}

fn tar_err(path: &str) -> impl FnOnce(std::io::Error) -> BuildImageError + '_ {
    move |source| BuildImageError::Archive {
        path: format!("/{path}"),
        source,
    }
}

/// Builds the layer of `tree`, every entry stamped with `mtime` (seconds since the epoch).
pub fn build_layer(tree: &FileTree, mtime: u64) -> Result<Layer, BuildImageError> {
    // Pre-size the output: binaries compress to ~40%, YAML much better.
    let capacity = (tree.content_bytes() / 2) as usize + 4096;
    let gz = flate2::GzBuilder::new()
        .operating_system(255)
        .mtime(0)
        .write(
            Vec::with_capacity(capacity),
            flate2::Compression::new(GZIP_LEVEL),
        );
    let tee = TeeWriter {
        hasher: Hasher::new(),
        gz,
        written: 0,
    };
    let mut builder = tar::Builder::new(tee);
    builder.mode(tar::HeaderMode::Deterministic);
    for (path, entry) in tree.entries() {
        let mut header = tar::Header::new_ustar();
        header.set_mode(entry.mode);
        header.set_uid(entry.owner.uid);
        header.set_gid(entry.owner.gid);
        header.set_mtime(mtime);
        // Empty names: the numeric ids are the truth, and a name could differ between the
        // image and the host that unpacks it.
        header
            .set_username("")
            .and_then(|()| header.set_groupname(""))
            .map_err(tar_err(path))?;
        match &entry.kind {
            EntryKind::Dir => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                builder
                    .append_data(&mut header, format!("{path}/"), std::io::empty())
                    .map_err(tar_err(path))?;
            }
            EntryKind::File(data) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(data.len() as u64);
                builder
                    .append_data(&mut header, path, data.as_slice())
                    .map_err(tar_err(path))?;
            }
            EntryKind::Symlink(target) => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_size(0);
                builder
                    .append_link(&mut header, path, target)
                    .map_err(tar_err(path))?;
            }
        }
    }
    let tee = builder.into_inner().map_err(tar_err("(end of archive)"))?;
    let TeeWriter {
        hasher,
        gz,
        written,
    } = tee;
    let compressed = gz.finish().map_err(tar_err("(gzip trailer)"))?;
    Ok(Layer {
        blob: Blob::new(MEDIA_TYPE_LAYER_GZIP, compressed),
        diff_id: hasher.finish(),
        uncompressed_size: written,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{EXEC_MODE, FILE_MODE, Owner};
    use flate2::read::GzDecoder;
    use std::io::Read;

    fn sample() -> FileTree {
        let mut t = FileTree::new();
        t.add_file(
            "/etc/passwd",
            b"root:x:0:0::/:/sbin/nologin\n".to_vec(),
            FILE_MODE,
        )
        .unwrap();
        t.add_dir("/tmp", 0o1777, Owner::ROOT).unwrap();
        t.add_file("/usr/local/bin/op", vec![7u8; 10_000], EXEC_MODE)
            .unwrap();
        t.add_dir("/home/nonroot", 0o755, Owner::NONROOT).unwrap();
        t.add_symlink("/bin/probe", "/usr/local/bin/op").unwrap();
        let long = format!("/configs/{}/catalog.json", "p".repeat(150));
        t.add_file(&long, b"{}".to_vec(), FILE_MODE).unwrap();
        t
    }

    #[test]
    fn same_tree_same_bytes_and_gzip_header_is_fixed() {
        let a = build_layer(&sample(), 1_700_000_000).unwrap();
        let b = build_layer(&sample(), 1_700_000_000).unwrap();
        assert_eq!(a, b);
        let d = &a.blob.data;
        // magic, deflate, no flags, mtime 0, OS unknown
        assert_eq!(&d[..4], &[0x1f, 0x8b, 8, 0]);
        assert_eq!(&d[4..8], &[0, 0, 0, 0]);
        assert_eq!(d[9], 255);
        let c = build_layer(&sample(), 1_700_000_001).unwrap();
        assert_ne!(a.blob.digest, c.blob.digest);
    }

    #[test]
    fn tar_contents_are_normalized() {
        let layer = build_layer(&sample(), 42).unwrap();
        let mut raw = Vec::new();
        GzDecoder::new(layer.blob.data.as_slice())
            .read_to_end(&mut raw)
            .unwrap();
        assert_eq!(Digest::of(&raw), layer.diff_id);
        assert_eq!(raw.len() as u64, layer.uncompressed_size);
        let mut ar = tar::Archive::new(raw.as_slice());
        let mut seen = Vec::new();
        for e in ar.entries().unwrap() {
            let e = e.unwrap();
            let h = e.header();
            let path = e.path().unwrap().to_string_lossy().into_owned();
            assert_eq!(h.mtime().unwrap(), 42, "{path}");
            assert!(!path.starts_with('/') && !path.contains(".."), "{path}");
            assert_eq!(h.username().unwrap(), Some(""));
            seen.push((path, h.mode().unwrap(), h.uid().unwrap(), h.entry_type()));
        }
        let find = |p: &str| seen.iter().find(|s| s.0 == p).cloned().unwrap();
        assert_eq!(find("tmp/").1, 0o1777);
        assert_eq!(find("usr/local/bin/op").1, 0o755);
        assert_eq!(find("home/nonroot/").2, 65532);
        assert_eq!(find("bin/probe").3, tar::EntryType::Symlink);
        assert!(seen.iter().any(|s| s.0.len() > 150));
        // parents before children
        let pos = |p: &str| seen.iter().position(|s| s.0 == p).unwrap();
        assert!(pos("usr/") < pos("usr/local/") && pos("usr/local/") < pos("usr/local/bin/op"));
    }

    #[test]
    fn golden_digest_pins_the_format() {
        // If this changes, every image digest changes: tar header layout, gzip backend or
        // level moved. That must be a deliberate decision, never a side effect.
        let mut t = FileTree::new();
        t.add_file("/hello.txt", b"hello\n".to_vec(), FILE_MODE)
            .unwrap();
        let layer = build_layer(&t, 0).unwrap();
        assert_eq!(
            (layer.diff_id.to_string(), layer.blob.digest.to_string()),
            (
                "sha256:93769e9d52b5a8be01b6d5097c596438ef22c80aa6dca1aff93786a003e964e2".into(),
                "sha256:69f3ba84b5d7f6f1e7351a68039ce99c3f097705ea48aae77a459112730f3c6d".into()
            )
        );
    }
}
