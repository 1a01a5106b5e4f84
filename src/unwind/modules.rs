//! Enumeration of the loaded modules and extraction of their unwind information from memory.
//!
//! Job: list every ELF object mapped in the process (main program, shared libraries,
//! `dlopen`ed ones, the vdso) with its path, load bias, address range and build-id, and
//! locate its `.eh_frame_hdr` / `.eh_frame` in memory. The sections are borrowed from the
//! module's mapping ([`SharedBytes::Mapped`]: no copy, and no page of them is touched until
//! an unwind needs it); [`LoadedModule::owned`] copies them for modules that may be unmapped
//! (see `module_set`).
//!
//! Not async-signal-safe: uses `dl_iterate_phdr` (which takes the loader lock) and allocates.
//! Called at start-up and after `dlopen`/`dlclose`, never from the signal handler.

use std::ffi::CStr;
use std::ops::Range;
use std::sync::Arc;

/// Unwind section bytes: the module's own mapped memory, valid while it stays loaded, or a
/// runtime-owned copy shared between module-set generations.
#[derive(Clone)]
pub enum SharedBytes {
    Mapped(&'static [u8]),
    Owned(Arc<[u8]>),
}

impl Default for SharedBytes {
    fn default() -> Self {
        SharedBytes::Mapped(&[])
    }
}

impl std::ops::Deref for SharedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            SharedBytes::Mapped(bytes) => bytes,
            SharedBytes::Owned(bytes) => bytes,
        }
    }
}

impl SharedBytes {
    /// The same bytes in runtime-owned memory.
    fn owned(&self) -> SharedBytes {
        match self {
            SharedBytes::Mapped(bytes) => SharedBytes::Owned(Arc::from(*bytes)),
            owned => owned.clone(),
        }
    }
}

/// A section copied out of memory: its address as stated in the ELF file, and its bytes.
#[derive(Clone)]
pub struct Section {
    pub svma: Range<u64>,
    pub data: SharedBytes,
}

/// One loaded ELF object.
#[derive(Clone)]
pub struct LoadedModule {
    pub path: String,
    /// Load bias: absolute address = bias + ELF virtual address.
    pub bias: u64,
    /// Absolute address range covered by its `PT_LOAD` segments.
    pub avma: Range<u64>,
    pub build_id: Vec<u8>,
    pub eh_frame_hdr: Option<Section>,
    pub eh_frame: Option<Section>,
}

impl LoadedModule {
    /// Whether its sections are borrowed from its mapping.
    pub fn borrows(&self) -> bool {
        [&self.eh_frame_hdr, &self.eh_frame]
            .into_iter()
            .flatten()
            .any(|s| matches!(s.data, SharedBytes::Mapped(_)))
    }

    /// The same module with its sections copied out of its mapping (which must still be
    /// mapped), so it can be unwound with after an unload. `.eh_frame` is cut at its
    /// terminator (borrowed, it runs to the end of its segment).
    pub fn owned(&self) -> LoadedModule {
        let hdr = self.eh_frame_hdr.as_ref().map(|s| Section {
            svma: s.svma.clone(),
            data: s.data.owned(),
        });
        let frame = self.eh_frame.as_ref().map(|s| match s.data {
            SharedBytes::Mapped(bytes) => {
                let len = eh_frame_len(bytes);
                Section {
                    svma: s.svma.start..s.svma.start + len as u64,
                    data: SharedBytes::Owned(Arc::from(&bytes[..len])),
                }
            }
            // Already a copy (cut when it was made): shared, not copied again.
            SharedBytes::Owned(_) => s.clone(),
        });
        LoadedModule {
            eh_frame_hdr: hdr,
            eh_frame: frame,
            ..self.clone()
        }
    }

    /// Identity used to tell whether a module is still the same across refreshes.
    pub fn same_object(&self, other: &LoadedModule) -> bool {
        self.bias == other.bias && self.avma == other.avma && self.path == other.path
    }
}

struct Segment {
    vaddr: u64,
    memsz: u64,
    kind: u32,
}

/// Lists the loaded modules, their sections borrowed from their mappings. Not
/// async-signal-safe.
pub fn loaded_modules() -> Vec<LoadedModule> {
    let mut raw: Vec<(String, u64, Vec<Segment>)> = Vec::new();
    unsafe extern "C" fn collect(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY:
        // - `data` is the `&mut Vec` passed to dl_iterate_phdr below, alive for the call;
        // - `info` and its `dlpi_phdr` array (`dlpi_phnum` entries) are valid during the
        //   callback, as documented by dl_iterate_phdr(3);
        // - `dlpi_name` is a NUL-terminated string or null.
        unsafe {
            let out = &mut *(data as *mut Vec<(String, u64, Vec<Segment>)>);
            let info = &*info;
            let name = if info.dlpi_name.is_null() {
                String::new()
            } else {
                CStr::from_ptr(info.dlpi_name)
                    .to_string_lossy()
                    .into_owned()
            };
            let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
            let segments = phdrs
                .iter()
                .map(|p| Segment {
                    vaddr: p.p_vaddr,
                    memsz: p.p_memsz,
                    kind: p.p_type,
                })
                .collect();
            out.push((name, info.dlpi_addr, segments));
        }
        0
    }
    // SAFETY: `collect` matches the callback signature and only touches `raw` through the
    // pointer passed here, which outlives the call.
    unsafe {
        libc::dl_iterate_phdr(Some(collect), (&mut raw as *mut Vec<_>).cast());
    }
    // SAFETY: getauxval has no preconditions.
    let vdso = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    let exe = std::fs::read_link("/proc/self/exe")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    raw.into_iter()
        .enumerate()
        .filter_map(|(i, (name, bias, segments))| {
            let path = if i == 0 && name.is_empty() {
                exe.clone()
            } else if vdso != 0 && segments_contain(&segments, bias, vdso) {
                "[vdso]".to_string()
            } else {
                name
            };
            describe(path, bias, &segments)
        })
        .collect()
}

fn segments_contain(segments: &[Segment], bias: u64, addr: u64) -> bool {
    segments.iter().any(|s| {
        s.kind == libc::PT_LOAD && (bias + s.vaddr..bias + s.vaddr + s.memsz).contains(&addr)
    })
}

fn describe(path: String, bias: u64, segments: &[Segment]) -> Option<LoadedModule> {
    let loads: Vec<&Segment> = segments
        .iter()
        .filter(|s| s.kind == libc::PT_LOAD)
        .collect();
    let start = loads.iter().map(|s| s.vaddr).min()?;
    let end = loads.iter().map(|s| s.vaddr + s.memsz).max()?;
    let load_end_of = |vaddr: u64| {
        loads
            .iter()
            .find(|s| (s.vaddr..s.vaddr + s.memsz).contains(&vaddr))
            .map(|s| s.vaddr + s.memsz)
    };
    let build_id = segments
        .iter()
        .filter(|s| s.kind == libc::PT_NOTE)
        .find_map(|s| {
            // SAFETY: PT_NOTE segments lie inside a loaded, readable segment of the module
            // (the loader maps them), `memsz` bytes long at `bias + vaddr`.
            let note = unsafe { mapped(bias + s.vaddr, s.memsz) };
            gnu_build_id(note)
        })
        .unwrap_or_default();
    let mut eh_frame_hdr = None;
    let mut eh_frame = None;
    if let Some(hdr) = segments.iter().find(|s| s.kind == libc::PT_GNU_EH_FRAME) {
        // SAFETY: PT_GNU_EH_FRAME describes `.eh_frame_hdr`, mapped readable at
        // `bias + vaddr` for `memsz` bytes while the module is loaded (it is: we are inside
        // the loader's own list of loaded objects, and no dlclose can run concurrently for
        // an object the program is still using).
        let hdr_bytes = unsafe { mapped(bias + hdr.vaddr, hdr.memsz) };
        if let Some(frame_start) = eh_frame_address(hdr_bytes, hdr.vaddr) {
            if let Some(limit) = load_end_of(frame_start) {
                // SAFETY: `frame_start..limit` lies within one PT_LOAD segment of this module.
                let region = unsafe { mapped(bias + frame_start, limit - frame_start) };
                // Up to the end of the segment, not scanned for its terminator: with
                // `.eh_frame_hdr`'s table the unwinder reads only the entries it looks up,
                // so the pages of the others are never touched.
                eh_frame = Some(Section {
                    svma: frame_start..limit,
                    data: SharedBytes::Mapped(region),
                });
            }
        }
        eh_frame_hdr = Some(Section {
            svma: hdr.vaddr..hdr.vaddr + hdr.memsz,
            data: SharedBytes::Mapped(hdr_bytes),
        });
    }
    Some(LoadedModule {
        path,
        bias,
        avma: bias + start..bias + end,
        build_id,
        eh_frame_hdr,
        eh_frame,
    })
}

/// Views `len` bytes of mapped module memory.
///
/// # Safety
/// `addr..addr+len` must be mapped and readable for the returned lifetime's use.
unsafe fn mapped(addr: u64, len: u64) -> &'static [u8] {
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(addr as *const u8, len as usize) }
}

/// Finds the NT_GNU_BUILD_ID descriptor in a note segment.
fn gnu_build_id(mut notes: &[u8]) -> Option<Vec<u8>> {
    let word = |b: &[u8], i: usize| -> Option<usize> {
        Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?) as usize)
    };
    let align4 = |n: usize| (n + 3) & !3;
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (word(notes, 0)?, word(notes, 4)?, word(notes, 8)?);
        let name_end = 12 + align4(namesz);
        let desc_end = name_end + align4(descsz);
        if kind == 3 && namesz == 4 && notes.get(12..16) == Some(b"GNU\0") {
            return notes.get(name_end..name_end + descsz).map(<[u8]>::to_vec);
        }
        notes = notes.get(desc_end..)?;
    }
    None
}

/// Decodes `eh_frame_ptr` from an `.eh_frame_hdr` located at ELF address `hdr_vaddr`,
/// returning the ELF address of `.eh_frame`.
fn eh_frame_address(hdr: &[u8], hdr_vaddr: u64) -> Option<u64> {
    if hdr.first() != Some(&1) {
        return None;
    }
    let enc = *hdr.get(1)?;
    let field = 4u64; // offset of eh_frame_ptr within the header
    let base = match enc & 0x70 {
        0x00 => 0,                 // absolute
        0x10 => hdr_vaddr + field, // pc-relative
        0x30 => hdr_vaddr,         // data-relative (to .eh_frame_hdr)
        _ => return None,
    };
    let raw = |n: usize| hdr.get(4..4 + n);
    let value: i64 = match enc & 0x0f {
        0x03 => u32::from_le_bytes(raw(4)?.try_into().ok()?) as i64,
        0x0b => i32::from_le_bytes(raw(4)?.try_into().ok()?) as i64,
        0x04 | 0x0c | 0x00 => i64::from_le_bytes(raw(8)?.try_into().ok()?),
        _ => return None,
    };
    Some(base.wrapping_add(value as u64))
}

/// Length of `.eh_frame` at the start of `region`: its CIE/FDE entries up to and including
/// the zero terminator, or up to the end of the region when there is none.
fn eh_frame_len(region: &[u8]) -> usize {
    let mut pos = 0usize;
    while let Some(b) = region.get(pos..pos + 4) {
        let len = u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize;
        if len == 0 {
            return pos + 4;
        }
        let (header, len) = if len == 0xffff_ffff {
            match region.get(pos + 4..pos + 12) {
                Some(b) => (
                    12,
                    u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize,
                ),
                None => break,
            }
        } else {
            (4, len)
        };
        match pos.checked_add(header + len) {
            Some(next) if next <= region.len() => pos = next,
            _ => break,
        }
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_main_program_libc_and_their_unwind_info() {
        let modules = loaded_modules();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let main = modules
            .iter()
            .find(|m| m.path == exe.to_string_lossy())
            .expect("main program listed");
        assert!(main.eh_frame.as_ref().is_some_and(|s| s.data.len() > 100));
        assert!(!main.build_id.is_empty());
        let here = finds_main_program_libc_and_their_unwind_info as *const () as u64;
        assert!(main.avma.contains(&here));
        let libc = modules
            .iter()
            .find(|m| m.path.contains("libc.so"))
            .expect("libc");
        assert!(libc.eh_frame_hdr.is_some() && libc.eh_frame.is_some());
    }

    #[test]
    fn owned_sections_are_copies_cut_at_the_terminator() {
        let modules = loaded_modules();
        let libc = modules
            .iter()
            .find(|m| m.path.contains("libc.so"))
            .expect("libc");
        assert!(libc.borrows(), "listed modules borrow their mappings");
        let owned = libc.owned();
        assert!(!owned.borrows());
        let mapped = libc.eh_frame.as_ref().expect("libc has .eh_frame");
        let copy = owned.eh_frame.as_ref().expect("and keeps it");
        assert_eq!(copy.data.len(), eh_frame_len(&mapped.data));
        assert!(copy.data.len() > 1000 && copy.data.len() <= mapped.data.len());
        assert_eq!(&copy.data[..], &mapped.data[..copy.data.len()]);
        assert_eq!(copy.svma.start, mapped.svma.start);
        assert_eq!(copy.svma.end - copy.svma.start, copy.data.len() as u64);
        let hdr = owned.eh_frame_hdr.as_ref().expect("and .eh_frame_hdr");
        assert_eq!(&hdr.data[..], &libc.eh_frame_hdr.as_ref().unwrap().data[..]);
        let again = owned.owned();
        let shared = again.eh_frame.as_ref().expect("still .eh_frame");
        assert_eq!(
            shared.data.as_ptr(),
            copy.data.as_ptr(),
            "a copy is shared, not copied again"
        );
    }

    #[test]
    fn eh_frame_len_stops_at_terminator() {
        let mut region = vec![];
        region.extend_from_slice(&8u32.to_le_bytes());
        region.extend_from_slice(&[0; 8]);
        region.extend_from_slice(&0u32.to_le_bytes());
        region.extend_from_slice(&[0xff; 16]);
        assert_eq!(eh_frame_len(&region), 16);
    }
}
