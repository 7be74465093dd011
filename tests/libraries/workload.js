// Real client libraries whose Lua scripts run unchanged against a server (issue 16's
// "real-library check"): bee-queue (a job queue: add, process, complete, retry with backoff,
// delayed jobs, stalled-job checks, removal, health counts) and redlock (a lock library:
// acquire, contend, extend, release). Prints one JSON summary line and exits non-zero when
// anything differs from what the libraries promise.
//
//   node workload.js PORT
'use strict';
const Queue = require('bee-queue');
const Redis = require('ioredis');
const Redlock = require('redlock');

const port = Number(process.argv[2]);
const host = '127.0.0.1';
const failures = [];
const check = (cond, what) => {
  if (!cond) failures.push(what);
};

async function beeQueue() {
  const name = `dq${Date.now()}`;
  const settings = {
    redis: { host, port },
    activateDelayedJobs: true,
    stallInterval: 500,
    delayedDebounce: 50,
    removeOnSuccess: false,
  };
  const producer = new Queue(name, { ...settings, isWorker: false });
  const worker = new Queue(name, settings);
  await producer.ready();
  await worker.ready();

  const N = 120;
  const attempts = new Map();
  const done = new Map();
  let retried = 0;
  worker.on('job retrying', () => retried++);
  const allDone = new Promise((resolve) => {
    worker.on('succeeded', (job, result) => {
      done.set(job.id, { result, at: Date.now() });
      if (done.size === N) resolve();
    });
  });
  worker.process(4, async (job) => {
    const n = (attempts.get(job.id) || 0) + 1;
    attempts.set(job.id, n);
    // Every 10th job fails its first attempt: bee-queue retries it.
    if (job.data.x % 10 === 0 && n === 1) throw new Error(`first attempt of ${job.data.x}`);
    return job.data.x * 2;
  });

  const jobs = [];
  const delayedUntil = new Map();
  const start = Date.now();
  for (let x = 0; x < N; x++) {
    let job = producer.createJob({ x }).retries(2);
    if (x % 10 === 0) job = job.backoff('fixed', 100);
    if (x % 15 === 0) {
      const until = start + 400;
      job = job.delayUntil(until);
      delayedUntil.set(x, until);
    }
    jobs.push(job.save());
  }
  const saved = await Promise.all(jobs);
  check(new Set(saved.map((j) => j.id)).size === N, 'bee-queue: every job got its own id');

  // A job removed before it runs never runs.
  const removed = await producer.createJob({ x: -1 }).delayUntil(Date.now() + 60000).save();
  await producer.removeJob(removed.id);
  check((await producer.getJob(removed.id)) === null, 'bee-queue: a removed job is gone');

  await Promise.race([
    allDone,
    new Promise((_, reject) => setTimeout(() => reject(new Error('bee-queue: jobs did not finish in 30 s')), 30000)),
  ]);
  for (const job of saved) {
    const d = done.get(job.id);
    check(d && d.result === job.data.x * 2, `bee-queue: job ${job.data.x} result`);
    const until = delayedUntil.get(job.data.x);
    if (until !== undefined) check(d && d.at >= until, `bee-queue: delayed job ${job.data.x} ran early`);
    const want = job.data.x % 10 === 0 ? 2 : 1;
    check(attempts.get(job.id) === want, `bee-queue: job ${job.data.x} attempts ${attempts.get(job.id)} != ${want}`);
  }
  const health = await producer.checkHealth();
  check(health.waiting === 0 && health.active === 0 && health.delayed === 0, `bee-queue: health ${JSON.stringify(health)}`);
  check(health.succeeded === N && health.failed === 0, `bee-queue: counts ${JSON.stringify(health)}`);
  const stored = await producer.getJob(saved[10].id);
  check(stored && stored.status === 'succeeded' && stored.options.retries === 1, 'bee-queue: retried job stored as succeeded with one retry left');
  await worker.close(5000);
  await producer.close(5000);
  return { jobs: N, retried, succeeded: health.succeeded, delayed: delayedUntil.size };
}

async function redlock() {
  const clients = [new Redis({ host, port }), new Redis({ host, port })];
  const a = new Redlock([clients[0]], { retryCount: 0 });
  const b = new Redlock([clients[1]], { retryCount: 0 });
  const resource = `locks:${Date.now()}`;
  const lock = await a.lock(resource, 2000);
  let contended = false;
  try {
    await b.lock(resource, 2000);
  } catch (e) {
    contended = e.name === 'LockError';
  }
  check(contended, 'redlock: a held lock is refused to another client');
  const extended = await lock.extend(5000);
  const ttl = await clients[0].pttl(resource);
  check(ttl > 2000 && ttl <= 5000, `redlock: extend set the ttl (${ttl})`);
  await extended.unlock();
  check((await clients[0].exists(resource)) === 0, 'redlock: unlock removed the key');
  // Releasing a lock that someone else holds now must not remove theirs.
  const again = await b.lock(resource, 2000);
  let stale = false;
  try {
    await extended.unlock();
  } catch (e) {
    stale = e.name === 'LockError';
  }
  check(stale, 'redlock: a stale lock does not release the new holder');
  check((await clients[1].get(resource)) === again.value, 'redlock: the new holder keeps its lock');
  await again.unlock();
  // Many contenders: the lock is held by one at a time.
  let inside = 0;
  let overlap = 0;
  let acquired = 0;
  const racer = new Redlock([clients[0]], { retryCount: 200, retryDelay: 5, retryJitter: 5 });
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      const l = await racer.lock(`${resource}:race`, 1000);
      inside++;
      if (inside > 1) overlap++;
      acquired++;
      await new Promise((r) => setTimeout(r, 2));
      inside--;
      await l.unlock();
    }),
  );
  check(acquired === 20 && overlap === 0, `redlock: ${acquired} acquisitions, ${overlap} overlaps`);
  clients.forEach((c) => c.disconnect());
  return { acquisitions: acquired + 2, overlaps: overlap };
}

(async () => {
  const summary = { bee_queue: await beeQueue(), redlock: await redlock(), failures };
  console.log(JSON.stringify(summary));
  process.exit(failures.length ? 1 : 0);
})().catch((e) => {
  console.error(e);
  process.exit(2);
});
