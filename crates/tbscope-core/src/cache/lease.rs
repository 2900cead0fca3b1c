//! Mappings under a read lease, and the thread that answers lease breaks.
//!
//! The watcher is one thread per process that blocks its signal and waits for it
//! (`sigwaitinfo`); every lease names that thread as the one to signal (`F_SETOWN_EX` with
//! `F_OWNER_TID`), so no other thread ever sees the signal and no signal handler is installed.
//! The kernel holds back whoever breaks a lease for `/proc/sys/fs/lease-break-time` seconds
//! (45 by default) or until we give it up; the watcher makes the mapping private (a copy) in
//! well under that. Only a process that cannot run for that long (stopped, frozen) loses the
//! guarantee.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, OnceLock};

use arrow_buffer::Buffer;

// Not in the libc crate for every target; values from <fcntl.h> on Linux.
const F_SETSIG: libc::c_int = 10;
const F_SETOWN_EX: libc::c_int = 15;
const F_OWNER_TID: libc::c_int = 0;

/// The mappings under a lease: (descriptor, address, length, made private already).
static MAPS: Mutex<Vec<(RawFd, usize, usize, bool)>> = Mutex::new(Vec::new());

struct Watcher {
    tid: libc::pid_t,
    sig: libc::c_int,
    /// The process it runs in: a child forked since has no watcher, and reads instead.
    pid: u32,
}

static WATCHER: OnceLock<Option<Watcher>> = OnceLock::new();

fn watcher() -> Option<&'static Watcher> {
    WATCHER.get_or_init(start).as_ref()
}

fn start() -> Option<Watcher> {
    // A real-time signal nothing else in a Python process uses; the kernel queues them
    // (with the descriptor in `si_fd`) rather than merging them.
    let sig = libc::SIGRTMIN() + 6;
    if sig > libc::SIGRTMAX() {
        return None;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("tbscope-lease".into())
        .spawn(move || {
            // SAFETY: sigset operations on a local set; the mask is this thread's own.
            let set = unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, sig);
                // The kernel sends SIGIO instead when the queue of real-time signals is
                // full: then every lease is answered.
                libc::sigaddset(&mut set, libc::SIGIO);
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                set
            };
            // SAFETY: gettid has no preconditions.
            let _ = tx.send(unsafe { libc::gettid() });
            loop {
                // SAFETY: an all-zero siginfo is a valid value for sigwaitinfo to fill.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                // SAFETY: `set` holds signals this thread blocks.
                let got = unsafe { libc::sigwaitinfo(&set, &mut info) };
                if got == sig {
                    make_private(Some(si_fd(&info)));
                } else if got == libc::SIGIO {
                    make_private(None);
                }
            }
        })
        .ok()?;
    let tid = rx.recv().ok()?;
    Some(Watcher {
        tid,
        sig,
        pid: std::process::id(),
    })
}

/// The descriptor of a lease-break signal (`si_fd`, after `si_band` in the SIGPOLL part of
/// siginfo, which the libc crate does not name).
fn si_fd(info: &libc::siginfo_t) -> RawFd {
    #[repr(C)]
    struct Poll {
        signo: libc::c_int,
        errno: libc::c_int,
        code: libc::c_int,
        band: libc::c_long,
        fd: libc::c_int,
    }
    // SAFETY: siginfo_t is larger than this prefix, which is its layout for SIGPOLL-style
    // signals on Linux (the union starts after the three ints, aligned for a long).
    unsafe { (*(info as *const libc::siginfo_t as *const Poll)).fd }
}

/// Copies the mappings of `fd` (every mapping: None) into memory of our own put in their
/// place, then gives their leases up.
fn make_private(fd: Option<RawFd>) {
    let mut maps = MAPS.lock().unwrap_or_else(|p| p.into_inner());
    for (f, addr, len, private) in maps.iter_mut() {
        if fd.is_some_and(|fd| fd != *f) {
            continue;
        }
        if !*private {
            // SAFETY: a fresh anonymous mapping, filled from ours (whose file nobody can
            // change while we hold the lease), then moved over ours in one step: a reader
            // faulting meanwhile waits for the move and finds the copy.
            unsafe {
                let copy = libc::mmap(
                    std::ptr::null_mut(),
                    *len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if copy == libc::MAP_FAILED {
                    // Keep the lease: the other process waits for the kernel to break it.
                    continue;
                }
                std::ptr::copy_nonoverlapping(*addr as *const u8, copy.cast::<u8>(), *len);
                libc::mprotect(copy, *len, libc::PROT_READ);
                let moved = libc::mremap(
                    copy,
                    *len,
                    *len,
                    libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                    *addr as *mut libc::c_void,
                );
                if moved == libc::MAP_FAILED {
                    libc::munmap(copy, *len);
                    continue;
                }
            }
            *private = true;
        }
        // SAFETY: giving up a lease on a descriptor we hold open.
        unsafe { libc::fcntl(*f, libc::F_SETLEASE, libc::F_UNLCK) };
    }
}

/// A read-only mapping of a whole file under a lease (see the module docs), unmapped when
/// the last buffer using it goes.
struct LeasedMap {
    ptr: NonNull<u8>,
    len: usize,
    /// Held open for the lease (closing it gives the lease up).
    file: File,
}

// SAFETY: the mapping is read-only and lives until drop; the watcher replaces its pages
// by identical ones under the registry's lock.
unsafe impl Send for LeasedMap {}
unsafe impl Sync for LeasedMap {}
impl std::panic::RefUnwindSafe for LeasedMap {}

impl Drop for LeasedMap {
    fn drop(&mut self) {
        let fd = self.file.as_raw_fd();
        // (In a forked child the registry may be locked by a thread that does not exist
        // there; it never maps, so it has nothing to take out.)
        if watcher().is_some_and(|w| w.pid == std::process::id()) {
            let mut maps = MAPS.lock().unwrap_or_else(|p| p.into_inner());
            maps.retain(|m| m.0 != fd);
        }
        // SAFETY: ptr/len are exactly what mmap returned (or what the watcher moved there).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// `len` bytes of `f` (its whole size, `len > 0`) mapped under a lease; the file back when
/// the kernel grants no lease (another user's file, a filesystem without leases, a file
/// open for writing, a forked child) or the mapping fails.
pub(super) fn map(f: File, len: usize) -> Result<Buffer, File> {
    let Some(w) = watcher().filter(|w| w.pid == std::process::id()) else {
        return Err(f);
    };
    let fd = f.as_raw_fd();
    // Held from the lease to the registration: a break arriving meanwhile waits for it.
    let mut maps = MAPS.lock().unwrap_or_else(|p| p.into_inner());
    if !lease(fd, w) {
        return Err(f);
    }
    // SAFETY: a fresh read-only private mapping of an open file; checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            fd,
            0,
        )
    };
    let Some(ptr) = NonNull::new(p.cast::<u8>()).filter(|_| p != libc::MAP_FAILED) else {
        // SAFETY: as above.
        unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
        return Err(f);
    };
    maps.push((fd, ptr.as_ptr() as usize, len, false));
    drop(maps);
    let map = LeasedMap { ptr, len, file: f };
    // SAFETY: `len` readable bytes at `ptr` for as long as the owner (the mapping) lives.
    Ok(unsafe { Buffer::from_custom_allocation(ptr, len, Arc::new(map)) })
}

/// A read lease on `fd` whose breaks signal the watcher `w`.
fn lease(fd: RawFd, w: &Watcher) -> bool {
    let owner: [libc::c_int; 2] = [F_OWNER_TID, w.tid];
    // SAFETY: fcntl on a descriptor we own, with the argument each command takes.
    unsafe {
        libc::fcntl(fd, F_SETSIG, w.sig) == 0
            && libc::fcntl(fd, F_SETOWN_EX, owner.as_ptr()) == 0
            && libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) == 0
    }
}

/// A read lease on `f`, with no mapping: until `f` is closed, whoever opens the file for
/// writing or truncates it waits (up to `/proc/sys/fs/lease-break-time`). Its break signals
/// the watcher, which finds no mapping of `f` and leaves the lease to be given up by closing
/// `f`. False when the kernel grants none (the file open for writing somewhere, another user's
/// file, a filesystem without leases, a forked child).
pub(super) fn hold(f: &File) -> bool {
    watcher()
        .filter(|w| w.pid == std::process::id())
        .is_some_and(|w| lease(f.as_raw_fd(), w))
}

/// Whether the lease [`hold`] took on `f` is still whole: nobody has tried to open the file
/// for writing since (a pending break reports the type it is being broken to).
pub(super) fn held(f: &File) -> bool {
    // SAFETY: as above; F_GETLEASE takes no argument.
    unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETLEASE) == libc::F_RDLCK }
}
