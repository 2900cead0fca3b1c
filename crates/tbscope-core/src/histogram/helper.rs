//! The helper thread that bins half of a large input: started once, steered off its caller's
//! CPU with a short scheduler slice, never waited for unless it has started.

use super::*;

/// The second thread's side of [`two_parts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Helper {
    /// Queued, not started.
    Waiting,
    /// Claiming pieces: the caller must wait for it.
    Running,
    /// Finished; its part is in `out`.
    Done,
    /// The caller finished first and left: the helper must touch nothing.
    Cancelled,
}

pub(super) struct Job {
    pub(super) next: AtomicUsize,
    pub(super) state: Mutex<Helper>,
    pub(super) done: Condvar,
    pub(super) out: Mutex<Option<Part>>,
}

impl Job {
    pub(super) fn state(&self) -> MutexGuard<'_, Helper> {
        // Only plain assignments happen under the lock: a poisoned one is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// On the caller's way out (normal or unwinding): cancel a helper that has not started, or
/// wait for one that has. What makes lending the helper borrowed data sound.
pub(super) struct AwaitHelper<'j>(&'j Job);

impl Drop for AwaitHelper<'_> {
    fn drop(&mut self) {
        let mut st = self.0.state();
        if *st == Helper::Waiting {
            *st = Helper::Cancelled;
            return;
        }
        while *st != Helper::Done {
            st = self.0.done.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Marks the helper done however it ends, so the caller never waits forever.
pub(super) struct HelperDone<'j>(&'j Job);

impl Drop for HelperDone<'_> {
    fn drop(&mut self) {
        *self.0.state() = Helper::Done;
        self.0.done.notify_all();
    }
}

/// A job for the helper thread.
pub(super) type Task = Box<dyn FnOnce() + Send + 'static>;

/// The helper thread's mailbox: at most one task waiting.
pub(super) struct Mailbox {
    pub(super) task: Mutex<Option<Task>>,
    pub(super) posted: Condvar,
    /// Where the helper may run (see [`Steer`]).
    pub(super) steer: Steer,
    /// Whether the helper is steered off its caller's CPU and asks for a short slice.
    pub(super) tuned: bool,
}

/// How the helper thread runs, from `TBSCOPE_HISTOGRAM_HELPER` (read once, when the first
/// large histogram is binned): unset or `tuned`, kept off its caller's CPU ([`Steer`]) with
/// a short scheduler slice ([`short_slice`]), which is what reaches the histogram target on a
/// busy machine; `plain`, an ordinary thread the scheduler places as it likes (for
/// applications that manage CPU affinity or scheduling themselves); `off`, no helper at all
/// (the caller bins alone, as on one CPU).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum HelperMode {
    Tuned,
    Plain,
    Off,
}

pub(super) fn helper_mode() -> HelperMode {
    match std::env::var("TBSCOPE_HISTOGRAM_HELPER")
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
        .as_str()
    {
        "plain" => HelperMode::Plain,
        "off" | "0" | "no" | "false" => HelperMode::Off,
        _ => HelperMode::Tuned,
    }
}

/// Keeps the helper thread off the CPU its caller runs on (Linux; elsewhere it does nothing).
///
/// Why: when the other CPU is busy, the scheduler may wake the helper on the waker's CPU,
/// where it takes over from the caller instead of running beside it, and two threads take as
/// long as one (traced on the 2-CPU bench VM: bench/README.md, "Measurements behind code
/// choices"). The other CPU is busy in the bench too: tensorboardX's call leaves an OpenBLAS
/// thread spinning there. Allowed every CPU but the caller's, the helper runs beside the
/// caller when another CPU lets it, or not at all, and the caller keeps its own CPU.
pub(super) struct Steer {
    #[cfg(target_os = "linux")]
    pub(super) thread: OnceLock<libc::pthread_t>,
    /// The CPU the helper is kept off, or -1 for none yet.
    #[cfg(target_os = "linux")]
    pub(super) off: std::sync::atomic::AtomicI32,
}

impl Steer {
    pub(super) fn new() -> Steer {
        Steer {
            #[cfg(target_os = "linux")]
            thread: OnceLock::new(),
            #[cfg(target_os = "linux")]
            off: std::sync::atomic::AtomicI32::new(-1),
        }
    }

    #[cfg(target_os = "linux")]
    pub(super) fn started(&self, handle: &std::thread::JoinHandle<()>) {
        use std::os::unix::thread::JoinHandleExt;
        let _ = self.thread.set(handle.as_pthread_t());
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn started(&self, _handle: &std::thread::JoinHandle<()>) {}

    /// Before waking the helper: keep it off the calling thread's CPU. A system call only
    /// when the caller has moved to another CPU since the last time; on any failure the
    /// helper keeps the CPUs it has.
    #[cfg(target_os = "linux")]
    pub(super) fn away_from_caller(&self) {
        let Some(&thread) = self.thread.get() else {
            return;
        };
        // SAFETY: plain libc calls on a zeroed `cpu_set_t` of the right size; `thread` is
        // the helper's handle, and the helper thread never exits (its loop has no end).
        unsafe {
            let cpu = libc::sched_getcpu();
            if cpu < 0 || cpu == self.off.load(Ordering::Relaxed) {
                return;
            }
            let size = std::mem::size_of::<libc::cpu_set_t>();
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, size, &mut set) != 0 || (cpu as usize) >= 8 * size {
                return;
            }
            libc::CPU_CLR(cpu as usize, &mut set);
            // Only the caller's CPU to run on: the helper could only take turns with it.
            if libc::CPU_COUNT(&set) == 0 {
                return;
            }
            if libc::pthread_setaffinity_np(thread, size, &set) == 0 {
                self.off.store(cpu, Ordering::Relaxed);
            }
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn away_from_caller(&self) {}
}

/// Hands `task` to the helper thread (started on first use), unless it is still busy with
/// an earlier one, or cannot be started: then the task is dropped and the caller bins alone.
///
/// Its own thread rather than rayon's pool: measured on the bench VM, a rayon worker that
/// had been idle for 10 ms took 1.8 ms (median) to pick up a spawned job, a thread blocked on
/// a condition variable 13 µs; histograms are logged after idle gaps (a training step).
pub(super) fn offer(task: Task) {
    if let Some(m) = mailbox() {
        let mut t = m.task.lock().unwrap_or_else(|p| p.into_inner());
        if t.is_none() {
            if m.tuned {
                m.steer.away_from_caller();
            }
            *t = Some(task);
            m.posted.notify_one();
        }
    }
}

/// The helper thread's mailbox, the thread started on first use; `None` if it cannot start
/// or is turned off ([`HelperMode`]).
pub(super) fn mailbox() -> Option<&'static Mailbox> {
    static MAILBOX: OnceLock<Option<&'static Mailbox>> = OnceLock::new();
    *MAILBOX.get_or_init(|| {
        let mode = helper_mode();
        if mode == HelperMode::Off {
            return None;
        }
        let m: &'static Mailbox = Box::leak(Box::new(Mailbox {
            task: Mutex::new(None),
            posted: Condvar::new(),
            steer: Steer::new(),
            tuned: mode == HelperMode::Tuned,
        }));
        let started = std::thread::Builder::new()
            .name("tbscope-histogram".into())
            .spawn(move || {
                if m.tuned {
                    short_slice();
                }
                helper_loop(m)
            });
        started.ok().map(|h| {
            m.steer.started(&h);
            m
        })
    })
}

/// Asks the scheduler for a short time slice for the calling (helper) thread (Linux 6.12+;
/// elsewhere, or if refused, nothing changes).
///
/// Why: the helper is woken onto the CPU its caller is not on, and that CPU is often busy, for
/// instance with the OpenBLAS thread that numpy's last dot product left spinning. The EEVDF
/// scheduler lets a running task finish its slice (1.4 ms by default on the 2-CPU bench VM)
/// before a woken one of the same slice preempts it; a task with a shorter slice preempts at
/// once. Traced on the bench VM (1M values right after tensorboardX's call), the helper
/// otherwise missed 10 calls of 60 entirely, the caller binning alone for 0.87-1.45 ms.
pub(super) fn short_slice() {
    #[cfg(target_os = "linux")]
    {
        /// `struct sched_attr`, first version (48 bytes).
        #[repr(C)]
        struct SchedAttr {
            size: u32,
            policy: u32,
            flags: u64,
            nice: i32,
            priority: u32,
            runtime: u64,
            deadline: u64,
            period: u64,
        }
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            policy: libc::SCHED_OTHER as u32,
            flags: 0,
            nice: 0,
            priority: 0,
            // The shortest slice the kernel allows for normal tasks: 0.1 ms.
            runtime: 100_000,
            deadline: 0,
            period: 0,
        };
        // SAFETY: a valid, fully initialised sched_attr for this thread (pid 0); the call
        // only reads it.
        unsafe {
            libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0);
        }
    }
}

/// The helper thread's body: runs each task posted to the mailbox.
pub(super) fn helper_loop(m: &'static Mailbox) -> ! {
    loop {
        let task = {
            let mut t = m.task.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(task) = t.take() {
                    break task;
                }
                t = m.posted.wait(t).unwrap_or_else(|p| p.into_inner());
            }
        };
        // A failing task has told its caller (`HelperDone`); the thread carries on.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(task));
    }
}

/// Whether a second thread can run beside the caller at all.
pub(super) fn helper_pays() -> bool {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get())) >= 2
}

/// Bins `vals` on the calling thread and a helper thread, which take pieces from a shared
/// counter. The caller starts at once and never waits for a helper that has not started
/// (on a busy machine it may start late, or never): it then does every piece itself. It
/// waits only for a piece the helper is in the middle of.
///
/// Why borrowed data is lent by a lifetime cast rather than `std::thread::scope`: a scope
/// spawns its threads per call and joins every one of them at its end, so the caller would
/// wait for a helper that has not even started (on a busy machine, for longer than binning
/// alone takes), and pay a thread spawn per histogram besides. The helper here is one
/// long-lived thread (steered and given a short slice once), and `AwaitHelper` gives the
/// guarantee a scope would: the borrow cannot end while the helper may read it.
pub(super) fn two_parts<F: Kernel>(vals: &[F], how: Lookup<'_, F>, edges: &[f64]) -> Vec<Part> {
    let pieces = vals.len().div_ceil(PIECE);
    let job = Arc::new(Job {
        next: AtomicUsize::new(0),
        state: Mutex::new(Helper::Waiting),
        done: Condvar::new(),
        out: Mutex::new(None),
    });
    let guard = AwaitHelper(&job);
    // SAFETY: the helper reads these only after moving `state` from Waiting to Running,
    // and `guard` keeps this function from returning or unwinding past them until the
    // state is Done (or was still Waiting, and is then Cancelled so the helper never reads
    // them). Only lifetimes change; `Lookup` is the same type.
    let (vals_h, how_h, edges_h): (&'static [F], Lookup<'static, F>, &'static [f64]) = unsafe {
        (
            &*(vals as *const [F]),
            std::mem::transmute::<Lookup<'_, F>, Lookup<'static, F>>(how),
            &*(edges as *const [f64]),
        )
    };
    let j = job.clone();
    offer(Box::new(move || {
        {
            let mut st = j.state();
            if *st != Helper::Waiting {
                return;
            }
            *st = Helper::Running;
        }
        let _done = HelperDone(&j);
        let p = part(vals_h, how_h, edges_h, &|| claim(&j.next, pieces));
        *j.out.lock().unwrap_or_else(|p| p.into_inner()) = Some(p);
    }));
    let mine = part(vals, how, edges, &|| claim(&job.next, pieces));
    drop(guard);
    let theirs = job.out.lock().unwrap_or_else(|p| p.into_inner()).take();
    // A helper that ran and left nothing panicked: its pieces are missing.
    let helped = *job.state() != Helper::Cancelled;
    assert!(
        !helped || theirs.is_some(),
        "the histogram helper thread failed"
    );
    std::iter::once(mine).chain(theirs).collect()
}
