//! What a writer has queued, and the background thread that hands it to the OS.
//!
//! Callers append framed records to `State::buf` under the mutex; the thread swaps that buffer
//! for its spare one (double buffering), writes it through the [`Sink`] without the lock, and
//! records the outcome for the next call to report.

use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::sink::Sink;
use super::{Failure, Options};

#[derive(Default)]
pub(super) struct State {
    /// Framed records not yet taken by the thread.
    pub(super) buf: Vec<u8>,
    pub(super) records: u64,
    /// Taken by the thread and being written.
    pub(super) in_flight_bytes: u64,
    pub(super) in_flight_records: u64,
    pub(super) bytes_written: u64,
    pub(super) records_written: u64,
    /// Flush requests: the thread has served every request up to `flush_done`.
    pub(super) flush_req: u64,
    pub(super) flush_done: u64,
    pub(super) fsync_req: bool,
    /// Set by close: the thread exits once everything is written.
    pub(super) stop: bool,
    /// Set when dropping a writer whose data cannot be written: the thread exits anyway.
    pub(super) abandon: bool,
    pub(super) closed: bool,
    /// The last write failed and its batch is back in `buf`: only an explicit request
    /// (flush, close, back-pressure) retries, so a full disk is not hammered.
    pub(super) failed: bool,
    /// To be reported by the next call.
    pub(super) failure: Option<Failure>,
    /// The thread sleeps and must be woken (a plain flag: it is only read under the lock).
    pub(super) idle: bool,
    /// The thread has exited.
    pub(super) gone: bool,
    /// Where the records go now (changes if the file had to be re-created elsewhere).
    pub(super) path: Option<PathBuf>,
}

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// Wakes the thread.
    pub(super) wake: Condvar,
    /// Wakes callers waiting for a flush.
    pub(super) done: Condvar,
    pub(super) opts: Options,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; if something did, the state is still
        // consistent (every update is a few plain assignments), so keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Marks the thread gone however it ends, so no caller waits for it forever.
struct Gone<'a>(&'a Shared);

impl Drop for Gone<'_> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.gone = true;
        st.idle = false;
        drop(st);
        self.0.done.notify_all();
    }
}

/// The shortest time between two writes started because `max_queue` records waited.
///
/// With TensorBoard's default of 10, a loop logging a million scalars a second would wake the
/// thread 100,000 times a second, and each wake-up is a system call on the caller's side and
/// a context switch. Batching for at least a millisecond caps that at a thousand, while data
/// still reaches the OS within a millisecond or so of `max_queue` records waiting.
const MIN_GAP: Duration = Duration::from_millis(1);

/// Spare capacity kept between batches; a one-off burst larger than this is given back.
const KEEP_CAPACITY: usize = 64 << 20;

pub(super) fn background(sh: &Shared, mut sink: Sink) {
    let _gone = Gone(sh);
    let every = sh.opts.flush_every;
    let mut spare: Vec<u8> = Vec::new();
    let mut deadline = Instant::now() + every;
    let mut calm_until = Instant::now();
    let mut st = sh.lock();
    loop {
        // Sleep until there is something to do.
        loop {
            if st.abandon {
                return;
            }
            if st.flush_req != st.flush_done {
                break;
            }
            if st.stop && !st.failed {
                break;
            }
            let now = Instant::now();
            if !st.failed && !st.buf.is_empty() {
                if now >= deadline {
                    break;
                }
                if st.records >= sh.opts.max_queue as u64 {
                    if now >= calm_until {
                        break;
                    }
                    // Too soon after the last write: let the batch grow a little longer,
                    // asleep and not to be woken (`idle` stays false) except by a flush.
                    st = sh
                        .wake
                        .wait_timeout(st, calm_until - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    continue;
                }
            } else if now >= deadline {
                deadline = now + every;
            }
            st.idle = true;
            st = sh
                .wake
                .wait_timeout(st, deadline.saturating_duration_since(now))
                .unwrap_or_else(|p| p.into_inner())
                .0;
            st.idle = false;
        }
        if st.stop && !st.failed && st.buf.is_empty() && st.flush_req == st.flush_done {
            return;
        }
        let served = st.flush_req;
        let fsync = std::mem::take(&mut st.fsync_req);
        std::mem::swap(&mut st.buf, &mut spare);
        let records = std::mem::take(&mut st.records);
        st.in_flight_bytes = spare.len() as u64;
        st.in_flight_records = records;
        drop(st);

        let res = sink.write(&spare, fsync);

        st = sh.lock();
        st.in_flight_bytes = 0;
        st.in_flight_records = 0;
        match res {
            Ok(w) => {
                st.bytes_written += spare.len() as u64 + w.extra_bytes;
                st.records_written += records + w.extra_records;
                st.failed = false;
                if let Some(r) = w.replaced {
                    st.path = Some(sink.path.clone());
                    st.failure = Some(r);
                }
                spare.clear();
            }
            Err(f) => {
                // The batch goes back in front of whatever was queued meanwhile.
                spare.extend_from_slice(&st.buf);
                std::mem::swap(&mut st.buf, &mut spare);
                spare.clear();
                st.records += records;
                st.failed = true;
                st.failure = Some(f);
            }
        }
        if spare.capacity() > KEEP_CAPACITY {
            spare = Vec::new();
        }
        st.flush_done = served;
        sh.done.notify_all();
        let now = Instant::now();
        deadline = now + every;
        calm_until = now + MIN_GAP;
    }
}
