//! What an executable needs from the image it goes into: its CPU architecture and whether it
//! is statically linked.
//!
//! Our images have no libc and no dynamic loader, so a dynamically linked binary would fail at
//! container start with a confusing "no such file or directory". Checking the ELF program
//! headers for a `PT_INTERP` segment turns that into a build-time error naming the file.

use crate::build::BuildImageError;
use object::elf::{self, FileHeader64};
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, FileKind};
use std::path::Path;

/// Facts about an executable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinaryInfo {
    /// GOARCH-style architecture (`amd64`, `arm64`, `ppc64le`, `s390x`, `riscv64`).
    pub architecture: String,
    /// The dynamic loader it asks for (`/lib64/ld-linux-x86-64.so.2`), or `None` when static.
    pub interpreter: Option<String>,
}

impl BinaryInfo {
    /// True when the binary runs without a dynamic loader.
    pub fn is_static(&self) -> bool {
        self.interpreter.is_none()
    }
}

/// Inspects the ELF executable `data` read from `path`.
pub fn inspect_binary(path: &Path, data: &[u8]) -> Result<BinaryInfo, BuildImageError> {
    let bad = |reason: String| BuildImageError::Binary {
        path: path.to_path_buf(),
        reason,
    };
    match FileKind::parse(data) {
        Ok(FileKind::Elf64) => {}
        Ok(FileKind::Elf32) => {
            return Err(bad("32-bit ELF executables are not supported".into()));
        }
        _ => {
            return Err(bad(
                "not an ELF executable (images run Linux binaries; build with cargo for a linux target)"
                    .into(),
            ));
        }
    }
    let header = FileHeader64::<Endianness>::parse(data)
        .map_err(|e| bad(format!("malformed ELF header: {e}")))?;
    let endian = header
        .endian()
        .map_err(|e| bad(format!("malformed ELF header: {e}")))?;
    match header.e_type(endian) {
        elf::ET_EXEC | elf::ET_DYN => {}
        other => return Err(bad(format!("ELF type {other} is not an executable"))),
    }
    let big = !endian_is_little(endian);
    let architecture = match (header.e_machine(endian), big) {
        (elf::EM_X86_64, false) => "amd64",
        (elf::EM_AARCH64, false) => "arm64",
        (elf::EM_PPC64, false) => "ppc64le",
        (elf::EM_S390, true) => "s390x",
        (elf::EM_RISCV, false) => "riscv64",
        (m, _) => {
            return Err(bad(format!(
                "unsupported CPU architecture (ELF machine {m})"
            )));
        }
    };
    let segments = header
        .program_headers(endian, data)
        .map_err(|e| bad(format!("malformed ELF program headers: {e}")))?;
    let mut interpreter = None;
    for seg in segments {
        if seg.p_type(endian) == elf::PT_INTERP {
            let raw = seg
                .data(endian, data)
                .map_err(|_| bad("malformed PT_INTERP segment".into()))?;
            let text = raw.split(|b| *b == 0).next().unwrap_or_default();
            interpreter = Some(String::from_utf8_lossy(text).into_owned());
        }
    }
    Ok(BinaryInfo {
        architecture: architecture.to_string(),
        interpreter,
    })
}

fn endian_is_little(e: Endianness) -> bool {
    matches!(e, Endianness::Little)
}

/// A minimal ELF64 little-endian executable header (no code) for tests: `machine` and an
/// optional `PT_INTERP`, padded to `size` bytes.
#[cfg(test)]
pub(crate) fn tiny_elf(machine: u16, interp: Option<&str>, size: usize) -> Vec<u8> {
    let phnum: u16 = if interp.is_some() { 2 } else { 1 };
    let mut out = Vec::new();
    out.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&elf::ET_DYN.to_le_bytes());
    out.extend_from_slice(&machine.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // entry
    out.extend_from_slice(&64u64.to_le_bytes()); // phoff
    out.extend_from_slice(&0u64.to_le_bytes()); // shoff
    out.extend_from_slice(&0u32.to_le_bytes()); // flags
    out.extend_from_slice(&64u16.to_le_bytes());
    out.extend_from_slice(&56u16.to_le_bytes());
    out.extend_from_slice(&phnum.to_le_bytes());
    out.extend_from_slice(&64u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    let data_off = 64 + 56 * u64::from(phnum);
    let mut ph = |p_type: u32, off: u64, len: u64| {
        out.extend_from_slice(&p_type.to_le_bytes());
        out.extend_from_slice(&4u32.to_le_bytes());
        for v in [off, 0, 0, len, len, 1] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    };
    ph(elf::PT_LOAD, 0, data_off);
    if let Some(i) = interp {
        ph(elf::PT_INTERP, data_off, i.len() as u64 + 1);
        out.extend_from_slice(i.as_bytes());
        out.push(0);
    }
    // Deterministic filler that compresses like code rather than like zeros.
    let mut x: u32 = 0x9e37_79b9;
    while out.len() < size {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        out.push((x % 7) as u8);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_elves() {
        let s = tiny_elf(elf::EM_X86_64, None, 0);
        let info = inspect_binary(Path::new("s"), &s).unwrap();
        assert_eq!(info.architecture, "amd64");
        assert!(info.is_static());
        let d = tiny_elf(elf::EM_AARCH64, Some("/lib/ld-linux-aarch64.so.1"), 4096);
        let info = inspect_binary(Path::new("d"), &d).unwrap();
        assert_eq!(info.architecture, "arm64");
        assert_eq!(
            info.interpreter.as_deref(),
            Some("/lib/ld-linux-aarch64.so.1")
        );
    }

    #[test]
    fn a_dynamic_test_binary_is_detected() {
        // The test binary itself is a normal (dynamically linked) cargo build.
        let exe = std::env::current_exe().unwrap();
        let data = std::fs::read(&exe).unwrap();
        let info = inspect_binary(&exe, &data).unwrap();
        let expected = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        };
        assert_eq!(info.architecture, expected);
        assert!(!info.is_static(), "{info:?}");
    }

    #[test]
    fn non_elf_is_refused_with_the_file_name() {
        let err = inspect_binary(Path::new("run.sh"), b"#!/bin/sh\necho hi\n").unwrap_err();
        assert!(err.to_string().starts_with("run.sh: not an ELF"), "{err}");
        assert!(inspect_binary(Path::new("x"), b"\x7fELF\x02").is_err());
    }
}
