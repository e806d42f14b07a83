//! Which shared libraries a dynamically linked binary needs, as the host's dynamic loader
//! resolves them (`ldd`), plus its ELF interpreter.
//!
//! Why ldd and not our own ELF `DT_NEEDED` walk: the loader's search (ld.so.cache, RUNPATH,
//! multiarch directories, transitive needs) is what decides which file is used at run time, and
//! ldd reports exactly that. The libraries go into the image at the same absolute paths, and the
//! image's loader is the host's, so it finds them there again without an `ld.so.cache`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::elf::{self, ElfInfo};
use crate::{Error, Result};

/// Absolute paths of every shared object `binary` loads at start-up, interpreter included,
/// sorted. Empty for a statically linked binary.
pub fn shared_objects(binary: &Path) -> Result<Vec<String>> {
    let info = elf::inspect(binary)?;
    let Some(interpreter) = &info.interpreter else {
        return Ok(Vec::new());
    };
    check_host(binary, &info)?;
    let command = format!("ldd {}", binary.display());
    let output = Command::new("ldd")
        .arg(binary)
        .env("LC_ALL", "C")
        .output()
        .map_err(|source| Error::Spawn {
            command: command.clone(),
            source,
        })?;
    if !output.status.success() {
        return Err(Error::CommandFailed {
            command,
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    let mut paths = parse(binary, &String::from_utf8_lossy(&output.stdout))?;
    paths.insert(interpreter.clone());
    Ok(paths.into_iter().collect())
}

fn check_host(binary: &Path, info: &ElfInfo) -> Result<()> {
    let host = elf::host_architecture();
    if info.architecture != host {
        return Err(Error::ForeignArchitecture {
            path: binary.to_owned(),
            binary: info.architecture.to_owned(),
            host: host.to_owned(),
        });
    }
    Ok(())
}

/// Parses ldd's output: `name => /path (0x...)`, `/abs/loader (0x...)`, `name => not found`,
/// and the kernel's vDSO (`linux-vdso.so.1 (0x...)`), which has no file and is skipped.
pub fn parse(binary: &Path, stdout: &str) -> Result<BTreeSet<String>> {
    let mut paths = BTreeSet::new();
    for line in stdout.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let unexpected = || Error::LddOutput {
            path: binary.to_owned(),
            line: line.to_owned(),
        };
        if line == "statically linked" {
            continue;
        }
        let target = match line.split_once("=>") {
            Some((name, target)) => {
                let target = target.trim();
                if target == "not found" {
                    return Err(Error::LibraryNotFound {
                        path: binary.to_owned(),
                        library: name.trim().to_owned(),
                    });
                }
                target
            }
            None => line,
        };
        let path = match target.rsplit_once(" (") {
            Some((path, address)) if address.ends_with(')') => path.trim(),
            _ => target,
        };
        if path.is_empty() {
            // `name =>  (0x...)`: resolved to nothing loadable from a file (vDSO on some glibcs).
            continue;
        }
        if path.starts_with('/') {
            paths.insert(path.to_owned());
        } else if path.starts_with("linux-vdso") || path.starts_with("linux-gate") {
            continue;
        } else {
            return Err(unexpected());
        }
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GLIBC: &str = "\tlinux-vdso.so.1 (0x00007ffd5e1f2000)
\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f0e0c2a0000)
\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f0e0c1c1000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f0e0bfe0000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f0e0c2d0000)
";

    #[test]
    fn parses_glibc_output() {
        let paths = parse(Path::new("kcp"), GLIBC).unwrap();
        let paths: Vec<_> = paths.into_iter().collect();
        assert_eq!(
            paths,
            [
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libm.so.6",
                "/lib64/ld-linux-x86-64.so.2",
            ]
        );
    }

    #[test]
    fn missing_library_is_an_error() {
        let out = "\tlibfoo.so.1 => not found\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n";
        match parse(Path::new("x"), out) {
            Err(Error::LibraryNotFound { library, .. }) => assert_eq!(library, "libfoo.so.1"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(matches!(
            parse(Path::new("x"), "something odd\n"),
            Err(Error::LddOutput { .. })
        ));
    }

    #[test]
    fn host_binary_needs_its_loader() {
        let libs = shared_objects(Path::new("/bin/true")).unwrap();
        let interp = elf::inspect(Path::new("/bin/true"))
            .unwrap()
            .interpreter
            .unwrap();
        assert!(libs.contains(&interp), "{libs:?}");
        assert!(libs.iter().any(|l| l.contains("libc.so")), "{libs:?}");
    }
}
