//! Freeing large values off the caller's thread: a reader's state (gigabytes of columns take a
//! quarter of a second to free) is handed to one freeing thread per process, so that whoever
//! lets go of it (a command about to exit, a notebook cell) does not wait.
//!
//! The queue is bounded: a loop that drops readers faster than they are freed would otherwise
//! keep every one of them in memory at once. When it is full the caller frees the value itself
//! (slower for that caller, but memory stays bounded and nobody blocks).

use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

/// Values waiting for the freeing thread before callers free their own: enough for a burst
/// (a few readers let go together), while at most this many states wait in memory.
pub const QUEUE: usize = 4;

/// What the freeing thread runs: wait until the value is its own, then drop it.
type Job = Box<dyn FnOnce() + Send>;

/// A freeing thread, started on first use, and its bounded queue.
pub struct Freer {
    name: &'static str,
    bound: usize,
    /// The queue, with the pid of the process that started the thread: a forked child
    /// inherits the queue but not the thread, and starts its own.
    slot: Mutex<Option<(u32, SyncSender<Job>)>>,
}

/// The process's freeing thread (`tbscope-free`).
pub static FREER: Freer = Freer::new("tbscope-free", QUEUE);

impl Freer {
    /// A freeing thread named `name` (started on first use) taking up to `bound` values.
    pub const fn new(name: &'static str, bound: usize) -> Freer {
        Freer {
            name,
            bound,
            slot: Mutex::new(None),
        }
    }

    /// Hands `state` to the freeing thread, which frees it once it holds the last reference
    /// (the caller's own goes when the caller is done). Returns false when the thread did not
    /// take it (the queue is full, or no thread can be started): `state` is then let go here,
    /// and the caller's last reference frees the value on the caller's thread as before.
    pub fn later<T: Send + Sync + 'static>(&self, state: Arc<T>) -> bool {
        let job: Job = Box::new(move || {
            let mut state = state;
            let state = loop {
                match Arc::try_unwrap(state) {
                    Ok(state) => break state,
                    Err(held) => {
                        state = held;
                        std::thread::yield_now();
                    }
                }
            };
            // One value failing to free must not stop the thread (the panic is printed).
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(state)));
        });
        let pid = std::process::id();
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        let job = match slot.take() {
            Some((made_in, queue)) if made_in == pid => match queue.try_send(job) {
                Ok(()) => {
                    *slot = Some((made_in, queue));
                    return true;
                }
                Err(TrySendError::Full(job)) => {
                    *slot = Some((made_in, queue));
                    drop(slot);
                    // Not run: only the reference it holds goes.
                    drop(job);
                    return false;
                }
                // The thread is gone (nothing in it panics, but if it did): start another.
                Err(TrySendError::Disconnected(job)) => job,
            },
            Some(inherited) => {
                // The parent's: dropping it could wait on a lock its thread held at the fork.
                std::mem::forget(inherited);
                job
            }
            None => job,
        };
        let (queue, jobs) = mpsc::sync_channel::<Job>(self.bound.max(1));
        let started = std::thread::Builder::new()
            .name(self.name.into())
            .spawn(move || {
                for job in jobs {
                    job();
                }
            });
        match started {
            Ok(_) => {
                // The thread holds the receiving end and the queue is empty: this cannot fail.
                let taken = queue.try_send(job).is_ok();
                *slot = Some((pid, queue));
                taken
            }
            Err(_) => {
                drop(slot);
                drop(job);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread::ThreadId;
    use std::time::{Duration, Instant};

    /// A value that records where it was dropped; with a gate, its drop waits for it.
    struct Tracked {
        drops: Arc<Mutex<Vec<ThreadId>>>,
        gate: Option<(mpsc::Sender<()>, Mutex<mpsc::Receiver<()>>)>,
    }

    impl Drop for Tracked {
        fn drop(&mut self) {
            if let Some((started, gate)) = &self.gate {
                let _ = started.send(());
                let _ = gate.lock().unwrap().recv_timeout(Duration::from_secs(20));
            }
            self.drops.lock().unwrap().push(std::thread::current().id());
        }
    }

    #[test]
    fn a_full_queue_frees_on_the_callers_thread_without_blocking() {
        let freer = Freer::new("tbscope-free-test", 2);
        let drops = Arc::new(Mutex::new(Vec::new()));
        let tracked = |gate| {
            Arc::new(Tracked {
                drops: Arc::clone(&drops),
                gate,
            })
        };
        // The thread's first value holds it until released, so the queue fills behind it.
        let (started_tx, started) = mpsc::channel();
        let (release, gate) = mpsc::channel();
        assert!(freer.later(tracked(Some((started_tx, Mutex::new(gate))))));
        started.recv_timeout(Duration::from_secs(20)).unwrap();
        assert!(freer.later(tracked(None)));
        assert!(freer.later(tracked(None)));
        assert!(drops.lock().unwrap().is_empty());
        // Full: the next is freed here, at once.
        let t0 = Instant::now();
        assert!(!freer.later(tracked(None)));
        assert!(t0.elapsed() < Duration::from_secs(5));
        let me = std::thread::current().id();
        assert_eq!(*drops.lock().unwrap(), [me]);
        // Released, the thread frees the rest: nothing is left behind.
        release.send(()).unwrap();
        let t0 = Instant::now();
        while drops.lock().unwrap().len() < 4 && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let drops = drops.lock().unwrap();
        assert_eq!(drops.len(), 4);
        assert!(drops[1..].iter().all(|&t| t != me));
    }

    #[test]
    fn the_thread_waits_for_the_callers_reference() {
        // The caller hands a clone over and drops its own afterwards: the thread frees it.
        let freer = Freer::new("tbscope-free-test", 2);
        let drops = Arc::new(Mutex::new(Vec::new()));
        let held = Arc::new(Tracked {
            drops: Arc::clone(&drops),
            gate: None,
        });
        assert!(freer.later(Arc::clone(&held)));
        std::thread::sleep(Duration::from_millis(20));
        assert!(drops.lock().unwrap().is_empty());
        drop(held);
        let t0 = Instant::now();
        while drops.lock().unwrap().is_empty() && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(drops.lock().unwrap().len(), 1);
        assert_ne!(drops.lock().unwrap()[0], std::thread::current().id());
    }
}
