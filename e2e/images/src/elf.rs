//! The two facts an image needs from an ELF binary: its machine (the image's architecture) and
//! its interpreter (whether it is dynamically linked, and which loader path it names).
//!
//! Why read the file instead of asking the build: `--binaries-dir` may point at binaries cross-built
//! for another target, and the platform written into the image must be the binary's, not the
//! build machine's. Only the ELF header and the program headers are read.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::{Error, Result};

const PT_INTERP: u32 = 3;

/// What the image needs to know about a binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfInfo {
    /// OCI architecture (`amd64`, `arm64`, ...).
    pub architecture: &'static str,
    /// Absolute path of the ELF interpreter (`PT_INTERP`), `None` for static binaries.
    pub interpreter: Option<String>,
}

/// Reads the architecture and interpreter of the ELF file at `path`.
pub fn inspect(path: &Path) -> Result<ElfInfo> {
    let mut file = File::open(path).map_err(Error::io(path))?;
    let malformed = |reason| Error::MalformedElf {
        path: path.to_owned(),
        reason,
    };
    let mut ident = [0u8; 64];
    let read = read_up_to(&mut file, &mut ident).map_err(Error::io(path))?;
    if read < 20 || ident[..4] != *b"\x7fELF" {
        return Err(Error::NotElf {
            path: path.to_owned(),
        });
    }
    let wide = match ident[4] {
        1 => false,
        2 => true,
        _ => return Err(malformed("unknown ELF class")),
    };
    let little = match ident[5] {
        1 => true,
        2 => false,
        _ => return Err(malformed("unknown byte order")),
    };
    let endian = Endian { little };
    let machine = endian.u16(&ident[18..20]);
    let architecture = architecture(machine, wide, little).ok_or(Error::UnsupportedMachine {
        path: path.to_owned(),
        machine,
    })?;

    let header_len = if wide { 64 } else { 52 };
    if read < header_len {
        return Err(malformed("truncated ELF header"));
    }
    let (phoff, phentsize, phnum) = if wide {
        (
            endian.u64(&ident[32..40]),
            endian.u16(&ident[54..56]),
            endian.u16(&ident[56..58]),
        )
    } else {
        (
            u64::from(endian.u32(&ident[28..32])),
            endian.u16(&ident[42..44]),
            endian.u16(&ident[44..46]),
        )
    };
    let min_entry = if wide { 56 } else { 32 };
    if phnum > 0 && usize::from(phentsize) < min_entry {
        return Err(malformed("program header entries too small"));
    }
    let mut table = vec![0u8; usize::from(phentsize) * usize::from(phnum)];
    file.seek(SeekFrom::Start(phoff))
        .and_then(|_| file.read_exact(&mut table))
        .map_err(|_| malformed("program headers outside the file"))?;

    let mut interpreter = None;
    for entry in table.chunks_exact(usize::from(phentsize.max(1))) {
        if endian.u32(&entry[0..4]) != PT_INTERP {
            continue;
        }
        let (offset, size) = if wide {
            (endian.u64(&entry[8..16]), endian.u64(&entry[32..40]))
        } else {
            (
                u64::from(endian.u32(&entry[4..8])),
                u64::from(endian.u32(&entry[16..20])),
            )
        };
        if size == 0 || size > 4096 {
            return Err(malformed("implausible PT_INTERP size"));
        }
        let mut bytes = vec![0u8; size as usize];
        file.seek(SeekFrom::Start(offset))
            .and_then(|_| file.read_exact(&mut bytes))
            .map_err(|_| malformed("PT_INTERP outside the file"))?;
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        let name =
            std::str::from_utf8(&bytes[..end]).map_err(|_| malformed("PT_INTERP is not UTF-8"))?;
        if !name.starts_with('/') {
            return Err(malformed("PT_INTERP is not an absolute path"));
        }
        interpreter = Some(name.to_owned());
        break;
    }
    Ok(ElfInfo {
        architecture,
        interpreter,
    })
}

/// OCI architecture of an ELF `e_machine`.
fn architecture(machine: u16, wide: bool, little: bool) -> Option<&'static str> {
    Some(match (machine, wide, little) {
        (62, true, true) => "amd64",
        (183, true, true) => "arm64",
        (3, false, true) => "386",
        (40, false, true) => "arm",
        (243, true, true) => "riscv64",
        (21, true, true) => "ppc64le",
        (22, true, false) => "s390x",
        _ => return None,
    })
}

/// OCI architecture of the machine this program runs on (the one `ldd` answers for).
pub fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "arm" => "arm",
        "riscv64" => "riscv64",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        other => other,
    }
}

fn read_up_to(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

#[derive(Clone, Copy)]
struct Endian {
    little: bool,
}

impl Endian {
    fn u16(self, b: &[u8]) -> u16 {
        let b = [b[0], b[1]];
        if self.little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    }

    fn u32(self, b: &[u8]) -> u32 {
        let b = [b[0], b[1], b[2], b[3]];
        if self.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    }

    fn u64(self, b: &[u8]) -> u64 {
        let b = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        if self.little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 little-endian file: header, one program header, optionally PT_INTERP.
    fn elf64(machine: u16, interp: Option<&str>) -> Vec<u8> {
        let mut f = vec![0u8; 64 + 56];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2;
        f[5] = 1;
        f[6] = 1;
        f[18..20].copy_from_slice(&machine.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[56..58].copy_from_slice(&1u16.to_le_bytes());
        let ph = 64;
        match interp {
            Some(name) => {
                let offset = f.len() as u64;
                let mut bytes = name.as_bytes().to_vec();
                bytes.push(0);
                f[ph..ph + 4].copy_from_slice(&PT_INTERP.to_le_bytes());
                f[ph + 8..ph + 16].copy_from_slice(&offset.to_le_bytes());
                f[ph + 32..ph + 40].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
                f.extend_from_slice(&bytes);
            }
            None => f[ph..ph + 4].copy_from_slice(&1u32.to_le_bytes()),
        }
        f
    }

    fn inspect_bytes(bytes: &[u8]) -> Result<ElfInfo> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bin");
        std::fs::write(&path, bytes).unwrap();
        inspect(&path)
    }

    #[test]
    fn dynamic_arm64() {
        let info = inspect_bytes(&elf64(183, Some("/lib/ld-linux-aarch64.so.1"))).unwrap();
        assert_eq!(info.architecture, "arm64");
        assert_eq!(
            info.interpreter.as_deref(),
            Some("/lib/ld-linux-aarch64.so.1")
        );
    }

    #[test]
    fn static_amd64() {
        let info = inspect_bytes(&elf64(62, None)).unwrap();
        assert_eq!(info.architecture, "amd64");
        assert_eq!(info.interpreter, None);
    }

    #[test]
    fn rejects_non_elf_and_unknown_machine() {
        assert!(matches!(
            inspect_bytes(b"#!/bin/sh\n"),
            Err(Error::NotElf { .. })
        ));
        assert!(matches!(
            inspect_bytes(&elf64(0x1234, None)),
            Err(Error::UnsupportedMachine {
                machine: 0x1234,
                ..
            })
        ));
        let mut truncated = elf64(62, Some("/lib64/ld-linux-x86-64.so.2"));
        truncated.truncate(100);
        assert!(matches!(
            inspect_bytes(&truncated),
            Err(Error::MalformedElf { .. })
        ));
    }

    #[test]
    fn this_test_binary() {
        let exe = std::env::current_exe().unwrap();
        let info = inspect(&exe).unwrap();
        assert_eq!(info.architecture, host_architecture());
    }
}
