// SPDX-License-Identifier: GPL-2.0
/*
 * kml-udp: UDP datagrams sent by calling the kernel's networking functions
 * directly, compared with sendto().  Seed 001, sections 5.4.2 and 6.4
 * ("Delay for sending 100, 5KB packets"), re-done for Linux 6.12.
 *
 * One kernel-mode process (installed in /trusted) sends the same traffic
 * over loopback to a receiver child on 127.0.0.1, three ways:
 *
 *   sendto()        the C library's sendto() (the `syscall` instruction,
 *                   which for a kernel-mode process is the fast path)
 *   sendto() call   sendto through libkml's call path (kml_syscall6())
 *   kernel_sendmsg() the socket is resolved once with sockfd_lookup(); each
 *                   datagram is one call of kernel_sendmsg() through a
 *                   handle (kml_kfunc_call()) with a struct msghdr and a
 *                   struct kvec laid out from the kernel's BTF; the
 *                   reference is dropped at the end with fput(sock->file)
 *                   (sockfd_put() is inline)
 *   driver          the seed's sender: below the socket layer.  Each
 *                   datagram is a socket buffer from __alloc_skb(),
 *                   extended with skb_put(), into which this process
 *                   writes the Ethernet, IPv4 and UDP headers and the
 *                   payload itself (plain stores: it runs at CPL 0), sets
 *                   skb->dev and skb->protocol (BTF offsets) and hands it
 *                   to the device with __dev_queue_xmit(): three calls
 *                   through handles, no UDP or IP output code, no route
 *                   lookup.  The device is loopback, init_net.loopback_dev
 *                   read directly (it lives as long as the initial network
 *                   namespace, i.e. always: no reference, no lock, which
 *                   could not be held across the return to this process
 *                   anyway), whose transmit function hands the buffer to
 *                   the receive path.
 *                   That path routes it as a packet from another host
 *                   (it carries no route of the sender's), which for
 *                   127.0.0.1 needs net.ipv4.conf.lo.route_localnet=1
 *                   and accept_local=1: kml-udp sets them for the run
 *                   and puts them back.
 *
 * Benchmarks: the seed's (RUNS runs of 100 datagrams of 5 KB each, time
 * per run: median, min, max; the ways interleaved run by run) and
 * datagrams per second over a longer run per way (SECONDS per way, in
 * five slices interleaved with the other ways').
 *
 * Integrity: every datagram carries (magic, way, sequence number, length,
 * header check) and a body pattern chosen by the sequence number; the
 * receiver compares every byte, records each sequence number in a bitmap
 * per way and, at the end, reports bad, duplicate and missing datagrams.
 * Any of them makes the exit status 1.  Flow control keeps loss out of
 * the picture: the receiver counts what it has taken in shared memory and
 * the sender never gets more than WINDOW datagrams ahead (the receive
 * buffer is sized for that), and every timed run of the seed benchmark
 * starts with the receiver's queue drained.
 *
 * The memory passed to the kernel functions (datagrams, msghdr, kvec,
 * address) must be present: the process locks all its memory.
 *
 * Options: -r RUNS (50), -n DATAGRAMS per run (100), -s BYTES (5120),
 * -t SECONDS per way for the longer run (2.0), --corrupt SEQ / --drop SEQ
 * (damage or skip datagram SEQ of every way: the receiver must notice).
 * Results are labelled EMULATED when /proc/cmdline has kml.accel=tcg.
 * Exit status: 0 all verified, 1 a datagram bad or missing, 2 usage or not
 * in kernel mode, 3 setup failure.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "kml.h"
#include "kml_klib.h"

#define MAGIC		0x6b6d6c75u	/* "kmlu" */
#define NWAYS		4
#define POOL		256		/* distinct body patterns */
#define WINDOW		128		/* datagrams in flight at most */
#define MAX_SIZE	65000
#define DRAIN_TIMEOUT_NS (20ULL * 1000000000ULL)
#define SLICES		5		/* the longer run, interleaved */

enum { W_SENDTO, W_CALLPATH, W_KERNEL, W_DRIVER };
static const char *const way_name[NWAYS] = {
	"sendto()", "sendto() call path", "kernel_sendmsg()",
	"driver (__dev_queue_xmit)",
};

/* Kernel values the driver way needs (not in BTF: macros) */
#define K_GFP_KERNEL	0xcc0u	/* __GFP_RECLAIM | __GFP_IO | __GFP_FS */
#define K_NUMA_NO_NODE	(-1)
#define ETH_HLEN_	14
#define ETH_P_IP_	0x0800
#define IP_DF_		0x4000
#define LOOPBACK_DEV	"lo"

/* The headers the driver way writes in front of each payload */
struct __attribute__((packed)) wire_hdr {
	uint8_t eth_dst[6], eth_src[6];
	uint16_t eth_type;
	uint8_t ver_ihl, tos;
	uint16_t tot_len, id, frag_off;
	uint8_t ttl, protocol;
	uint16_t check;
	uint32_t saddr, daddr;
	uint16_t source, dest, len, ucheck;
};
_Static_assert(sizeof(struct wire_hdr) == ETH_HLEN_ + 20 + 8, "wire header");

struct hdr {
	uint32_t magic;
	uint32_t way;
	uint64_t seq;
	uint32_t len;
	uint32_t check;
};

/* shared between sender and receiver (MAP_SHARED) */
struct shared {
	uint64_t received;		/* datagrams taken in, any way, any state */
	uint64_t sent[NWAYS];		/* written by the sender before done */
	int done;
	/* receiver's results */
	uint64_t good[NWAYS], bad, dup, missing[NWAYS];
	int finished;
	char first_problem[200];
};

static struct shared *sh;
static size_t dsize = 5120;
static unsigned char *pool;		/* POOL datagrams of dsize bytes */
static long corrupt_seq = -1, drop_seq = -1;

static void die(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("kml-udp: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint32_t hdr_check(const struct hdr *h)
{
	uint64_t x = ((uint64_t)h->magic << 32 | h->way) ^ h->seq * 0x9e3779b97f4a7c15ULL ^
		     (uint64_t)h->len << 17;

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 32;
	return (uint32_t)x;
}

/* Body byte i of pattern k (xorshift stream seeded by k). */
static void fill_body(unsigned char *b, size_t n, unsigned int k)
{
	uint64_t x = 0x2545f4914f6cdd1dULL * (k + 1);
	size_t i;

	for (i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (unsigned char)x;
	}
}

static unsigned char *dgram(uint64_t seq)
{
	return pool + (seq % POOL) * dsize;
}

static void build_pool(void)
{
	unsigned int k;

	pool = aligned_alloc(4096, ((POOL * dsize + 4095) / 4096) * 4096);
	if (!pool)
		die(3, "out of memory");
	for (k = 0; k < POOL; k++)
		fill_body(pool + k * dsize + sizeof(struct hdr),
			  dsize - sizeof(struct hdr), k);
}

/* ---- receiver ---------------------------------------------------------- */

struct bitmap {
	uint64_t *w;
	size_t words;
};

/* 1 if bit was already set */
static int bit_set(struct bitmap *b, uint64_t bit)
{
	size_t i = bit / 64;
	int was;

	if (i >= b->words) {
		size_t n = b->words ? b->words : 1024;
		uint64_t *w;

		while (n <= i)
			n *= 2;
		w = realloc(b->w, n * 8);
		if (!w)
			die(3, "receiver: out of memory");
		memset(w + b->words, 0, (n - b->words) * 8);
		b->w = w;
		b->words = n;
	}
	was = (b->w[i] >> (bit % 64)) & 1;
	b->w[i] |= 1ULL << (bit % 64);
	return was;
}

static int bit_get(const struct bitmap *b, uint64_t bit)
{
	return bit / 64 < b->words && ((b->w[bit / 64] >> (bit % 64)) & 1);
}

static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *fmt, ...)
{
	va_list ap;

	if (sh->first_problem[0])
		return;
	va_start(ap, fmt);
	vsnprintf(sh->first_problem, sizeof(sh->first_problem), fmt, ap);
	va_end(ap);
}

static int receiver(int fd)
{
	struct bitmap seen[NWAYS] = { 0 };
	unsigned char *buf = malloc(dsize + 1);
	struct timeval tv = { .tv_sec = 0, .tv_usec = 100000 };
	size_t body = dsize - sizeof(struct hdr);
	int quiet = 0, w;

	if (!buf)
		die(3, "receiver: out of memory");
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		die(3, "receiver: SO_RCVTIMEO: %s", strerror(errno));
	for (;;) {
		ssize_t n = recv(fd, buf, dsize + 1, 0);
		struct hdr h;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				die(3, "receiver: recv: %s", strerror(errno));
			if (!__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE))
				continue;
			/* done: stop when all arrived, or after 2 s of silence */
			uint64_t total = 0;

			for (w = 0; w < NWAYS; w++)
				total += sh->sent[w];
			if (__atomic_load_n(&sh->received, __ATOMIC_ACQUIRE) >= total ||
			    ++quiet >= 20)
				break;
			continue;
		}
		quiet = 0;
		__atomic_add_fetch(&sh->received, 1, __ATOMIC_RELEASE);
		if ((size_t)n != dsize) {
			sh->bad++;
			problem("datagram of %zd bytes, expected %zu", n, dsize);
			continue;
		}
		memcpy(&h, buf, sizeof(h));
		if (h.magic != MAGIC || h.way >= NWAYS || h.len != dsize ||
		    h.check != hdr_check(&h)) {
			sh->bad++;
			problem("bad header (magic %#x way %u seq %llu len %u)",
				h.magic, h.way, (unsigned long long)h.seq, h.len);
			continue;
		}
		if (bit_set(&seen[h.way], h.seq)) {
			sh->dup++;
			problem("%s datagram %llu received twice", way_name[h.way],
				(unsigned long long)h.seq);
			continue;
		}
		/* it arrived (not missing); is it intact? */
		if (memcmp(buf + sizeof(h), dgram(h.seq) + sizeof(h), body)) {
			sh->bad++;
			problem("%s datagram %llu: payload differs from its pattern",
				way_name[h.way], (unsigned long long)h.seq);
			continue;
		}
		sh->good[h.way]++;
	}
	for (w = 0; w < NWAYS; w++) {
		uint64_t s;

		for (s = 0; s < sh->sent[w]; s++)
			if (!bit_get(&seen[w], s)) {
				if (!sh->missing[w]++)
					problem("%s datagram %llu never arrived",
						way_name[w], (unsigned long long)s);
			}
		for (s = sh->sent[w]; s < seen[w].words * 64; s++)
			if (bit_get(&seen[w], s)) {
				sh->bad++;
				problem("%s datagram %llu: beyond the %llu sent",
					way_name[w], (unsigned long long)s,
					(unsigned long long)sh->sent[w]);
			}
	}
	__atomic_store_n(&sh->finished, 1, __ATOMIC_RELEASE);
	return sh->bad || sh->dup ? 1 : 0;
}

/* ---- sender ------------------------------------------------------------ */

static int fd;
static struct sockaddr_in dst;
static uint64_t seq[NWAYS];	/* next sequence number per way */
static uint64_t sent_total;	/* datagrams really sent, all ways */

/* kernel functions (handles) and layouts */
static int h_sockfd_lookup, h_kernel_sendmsg, h_fput, h_alloc_skb, h_skb_put,
	   h_xmit, h_j2ms;
static unsigned long ksock, kdev;
static unsigned char *kmsg, *kvec;
static struct wire_hdr wire;
static struct {
	long msghdr_size, msg_name, msg_namelen, msg_flags, kvec_size,
	     iov_base, iov_len, sock_file, skb_dev, skb_protocol, net_loopback;
} L;

static int kfopen(const char *name)
{
	int h = kml_kfunc_open(name);

	if (h < 0)
		die(3, "kml_kfunc_open(%s): %s", name, kml_kfunc_strerror(h));
	return h;
}

/* A call through a handle that must not be refused; its value. */
static void kf(const char *what, int e)
{
	if (e)
		die(3, "kernel call of %s: %s", what, kml_kfunc_strerror(e));
}
#define KF(name, h, ...) ({ unsigned long r_ = 0; \
	kf(name, kml_kfunc_call(h, &r_, ##__VA_ARGS__)); r_; })

static uint16_t ip_checksum(const void *p, size_t n)
{
	const uint16_t *w = p;
	uint32_t sum = 0;

	for (; n > 1; n -= 2)
		sum += *w++;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static long member(const char *type, const char *name, size_t size)
{
	struct kml_btf_member m;

	if (kml_btf_member(NULL, type, name, &m))
		die(3, "%s", kml_klib_error());
	if (m.size != size)
		die(3, "BTF: %s.%s is %zu bytes, expected %zu", type, name,
		    m.size, size);
	return (long)m.offset;
}

static void release_at_exit(void);

static void put(unsigned char *base, long off, const void *v, size_t n)
{
	memcpy(base + off, v, n);
}

/*
 * The receive path routes the driver way's datagrams like packets from
 * another host (they carry no route of the sender's): on lo it drops
 * 127.0.0.0/8 as martian unless route_localnet is 1, and a local source
 * address unless accept_local is 1.  Both are set for the run and put
 * back at exit.
 */
#define LO_CONF		"/proc/sys/net/ipv4/conf/" LOOPBACK_DEV "/"
static const char *const lo_knobs[] = { "route_localnet", "accept_local" };
#define NKNOBS		(sizeof(lo_knobs) / sizeof(lo_knobs[0]))
static int lo_saved[NKNOBS] = { -1, -1 };

static int knob_path(char *path, size_t n, size_t i)
{
	return snprintf(path, n, LO_CONF "%s", lo_knobs[i]);
}

static void lo_restore(void)
{
	char path[128];
	size_t i;

	for (i = 0; i < NKNOBS; i++) {
		knob_path(path, sizeof(path), i);
		if (lo_saved[i] >= 0 && bench_write_int(path, lo_saved[i]))
			fprintf(stderr, "kml-udp: cannot put %s back to %d: %s\n",
				path, lo_saved[i], strerror(errno));
	}
}

static void lo_accept_own_datagrams(void)
{
	char path[128];
	size_t i;
	FILE *f;

	atexit(lo_restore);
	for (i = 0; i < NKNOBS; i++) {
		int v;

		knob_path(path, sizeof(path), i);
		f = fopen(path, "r");
		if (!f || fscanf(f, "%d", &v) != 1)
			die(3, "cannot read %s", path);
		fclose(f);
		if (v == 1)
			continue;
		if (bench_write_int(path, 1))
			die(3, "cannot set %s: %s", path, strerror(errno));
		lo_saved[i] = v;
	}
}

static void kernel_setup(void)
{
	unsigned long r;
	int err = 0, e;
	void *name = &dst;
	int namelen = sizeof(dst);

	void *init_net = kml_ksym("init_net");
	struct sockaddr_in src;
	socklen_t alen = sizeof(src);

	h_sockfd_lookup = kfopen("sockfd_lookup");
	h_kernel_sendmsg = kfopen("kernel_sendmsg");
	h_fput = kfopen("fput");
	h_alloc_skb = kfopen("__alloc_skb");
	h_skb_put = kfopen("skb_put");
	h_xmit = kfopen("__dev_queue_xmit");
	h_j2ms = kfopen("jiffies_to_msecs");
	if (!init_net)
		die(3, "%s", kml_klib_error());
	L.msghdr_size = kml_btf_sizeof(NULL, "struct msghdr");
	L.kvec_size = kml_btf_sizeof(NULL, "struct kvec");
	if (L.msghdr_size < 0 || L.kvec_size < 0)
		die(3, "%s", kml_klib_error());
	L.msg_name = member("msghdr", "msg_name", sizeof(void *));
	L.msg_namelen = member("msghdr", "msg_namelen", sizeof(int));
	L.msg_flags = member("msghdr", "msg_flags", sizeof(unsigned int));
	L.iov_base = member("kvec", "iov_base", sizeof(void *));
	L.iov_len = member("kvec", "iov_len", sizeof(size_t));
	L.sock_file = member("socket", "file", sizeof(void *));
	L.skb_dev = member("sk_buff", "dev", sizeof(void *));
	L.skb_protocol = member("sk_buff", "protocol", sizeof(uint16_t));
	L.net_loopback = member("net", "loopback_dev", sizeof(void *));

	/* zeroed: no control data, no iocb, no ubuf, flags 0 */
	kmsg = aligned_alloc(64, ((size_t)L.msghdr_size + 63) / 64 * 64);
	kvec = aligned_alloc(64, ((size_t)L.kvec_size + 63) / 64 * 64);
	if (!kmsg || !kvec)
		die(3, "out of memory");
	memset(kmsg, 0, (size_t)L.msghdr_size);
	memset(kvec, 0, (size_t)L.kvec_size);
	put(kmsg, L.msg_name, &name, sizeof(name));
	put(kmsg, L.msg_namelen, &namelen, sizeof(namelen));

	/* struct socket *sockfd_lookup(int fd, int *err): takes a reference */
	e = kml_kfunc_call(h_sockfd_lookup, &r, fd, &err);
	if (e)
		die(3, "kernel call of sockfd_lookup: %s", kml_kfunc_strerror(e));
	if (!r)
		die(3, "sockfd_lookup(%d): %s", fd, strerror(-err));
	ksock = r;
	atexit(release_at_exit);

	/* the driver way: the device, and the headers of every datagram */
	kdev = *(volatile unsigned long *)((unsigned long)init_net +
					   (unsigned long)L.net_loopback);
	if (!kdev)
		die(3, "init_net has no loopback device");
	if (getsockname(fd, (struct sockaddr *)&src, &alen))
		die(3, "getsockname: %s", strerror(errno));
	memset(&wire, 0, sizeof(wire));	/* loopback's address: 0 */
	wire.eth_type = htons(ETH_P_IP_);
	wire.ver_ihl = 0x45;
	wire.tot_len = htons((uint16_t)(20 + 8 + dsize));
	wire.frag_off = htons(IP_DF_);	/* not fragmented: the ID may be 0 */
	wire.ttl = 64;
	wire.protocol = IPPROTO_UDP;
	wire.saddr = src.sin_addr.s_addr;
	wire.daddr = dst.sin_addr.s_addr;
	wire.check = ip_checksum(&wire.ver_ihl, 20);
	wire.source = src.sin_port;
	wire.dest = dst.sin_port;
	wire.len = htons((uint16_t)(8 + dsize));
	wire.ucheck = 0;		/* IPv4: no UDP checksum */
	lo_accept_own_datagrams();
}

/* One datagram below the socket layer: its __dev_queue_xmit() value */
static long driver_send(const unsigned char *d)
{
	size_t total = sizeof(wire) + dsize;
	unsigned long skb, data;
	uint16_t proto = htons(ETH_P_IP_);

	skb = KF("__alloc_skb", h_alloc_skb, total, K_GFP_KERNEL, 0, K_NUMA_NO_NODE);
	if (!skb)
		return -ENOMEM;
	data = KF("skb_put", h_skb_put, skb, total);
	memcpy((void *)data, &wire, sizeof(wire));
	memcpy((void *)(data + sizeof(wire)), d, dsize);
	memcpy((void *)(skb + (unsigned long)L.skb_dev), &kdev, sizeof(kdev));
	memcpy((void *)(skb + (unsigned long)L.skb_protocol), &proto, sizeof(proto));
	/* consumes the buffer; NET_XMIT_SUCCESS is 0 */
	return (int)KF("__dev_queue_xmit", h_xmit, skb, 0);
}

/* Drop the reference of sockfd_lookup(): 0 or a kml_kfunc_call() error. */
static int kernel_release(void)
{
	unsigned long file;

	if (!ksock)
		return 0;
	/* sockfd_put(sock) = fput(sock->file); the process reads sock->file */
	file = *(volatile unsigned long *)(ksock + (unsigned long)L.sock_file);
	ksock = 0;
	return kml_kfunc_call(h_fput, NULL, file);
}

/* at exit after an error */
static void release_at_exit(void)
{
	int e = kernel_release();

	if (e)
		fprintf(stderr, "kml-udp: kernel call of fput: %s\n",
			kml_kfunc_strerror(e));
}

static void send_one(int way)
{
	uint64_t s = seq[way]++;
	unsigned char *d = dgram(s);
	struct hdr h = { MAGIC, (uint32_t)way, s, (uint32_t)dsize, 0 };
	unsigned long r;
	long n;
	int e, damaged = 0;

	if ((long)s == drop_seq)
		return;
	sent_total++;
	h.check = hdr_check(&h);
	memcpy(d, &h, sizeof(h));
	if ((long)s == corrupt_seq) {
		d[dsize - 1] ^= 0x5a;
		damaged = 1;
	}
	switch (way) {
	case W_SENDTO:
		n = sendto(fd, d, dsize, 0, (struct sockaddr *)&dst, sizeof(dst));
		if (n < 0)
			n = -errno;
		break;
	case W_CALLPATH:
		n = kml_syscall6(SYS_sendto, fd, (long)d, (long)dsize, 0,
				 (long)&dst, sizeof(dst));
		break;
	default:
		put(kvec, L.iov_base, &d, sizeof(d));
		put(kvec, L.iov_len, &dsize, sizeof(dsize));
		/* int kernel_sendmsg(sock, msg, vec, num, len) */
		e = kml_kfunc_call(h_kernel_sendmsg, &r, ksock, kmsg, kvec, 1, dsize);
		if (e)
			die(3, "kernel call of kernel_sendmsg: %s",
			    kml_kfunc_strerror(e));
		n = (int)r;
		break;
	case W_DRIVER:
		n = driver_send(d);
		if (n == 0)
			n = (long)dsize;
		else if (n > 0)		/* NET_XMIT_DROP, ...: as a failure */
			n = -EIO;
		break;
	}
	if (damaged)
		d[dsize - 1] ^= 0x5a;
	if (n != (long)dsize)
		die(3, "%s: %s", way_name[way],
		    n < 0 ? strerror((int)-n) : "short send");
}

static uint64_t in_flight(void)
{
	return sent_total - __atomic_load_n(&sh->received, __ATOMIC_ACQUIRE);
}

static void wait_in_flight(uint64_t at_most)
{
	uint64_t t0 = now_ns();

	while (in_flight() > at_most) {
		sched_yield();
		if (now_ns() - t0 > DRAIN_TIMEOUT_NS)
			die(1, "the receiver stopped taking datagrams (%llu in "
			    "flight after 20 s): lost on the way",
			    (unsigned long long)in_flight());
	}
}

/* one timed run of n datagrams into a drained queue */
static uint64_t timed_run(int way, int n)
{
	uint64_t t0;
	int i;

	wait_in_flight(0);
	t0 = now_ns();
	for (i = 0; i < n; i++)
		send_one(way);
	return now_ns() - t0;
}

/*
 * Send for `secs` seconds with WINDOW datagrams in flight at most; adds
 * the datagrams and the nanoseconds to *count and *ns.
 */
static void stream(int way, double secs, uint64_t *count, uint64_t *ns)
{
	uint64_t t0, t, n = 0, limit = (uint64_t)(secs * 1e9);

	wait_in_flight(0);
	t0 = now_ns();
	do {
		int i;

		for (i = 0; i < 16; i++) {
			wait_in_flight(WINDOW - 1);
			send_one(way);
		}
		n += 16;
		t = now_ns() - t0;
	} while (t < limit);
	*count += n;
	*ns += t;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static const char *emulated(void)
{
	struct bench_sysinfo si;

	bench_gather_sysinfo(&si);
	return si.emulated ? BENCH_EMULATED_NOTE : NULL;
}

/*
 * Median ns of one call of jiffies_to_msecs() through a handle
 * (kml_kfunc_call()), and of one getppid() through the call path.
 */
static void call_costs(double *kfunc, double *sys)
{
	enum { N = 2000 };
	static uint64_t b[N], c[N];
	int i;

	for (i = 0; i < N; i++) {
		uint64_t t0 = now_ns();

		if (kml_kfunc_call(h_j2ms, NULL, 1000))
			die(3, "kernel call of jiffies_to_msecs failed");
		b[i] = now_ns() - t0;
		t0 = now_ns();
		kml_syscall0(SYS_getppid);
		c[i] = now_ns() - t0;
	}
	qsort(b, N, sizeof(b[0]), cmp_u64);
	qsort(c, N, sizeof(c[0]), cmp_u64);
	*kfunc = (double)b[N / 2];
	*sys = (double)c[N / 2];
}

static void usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [-r RUNS] [-n DATAGRAMS] [-s BYTES] "
		"[-t SECONDS] [--corrupt SEQ] [--drop SEQ]\n", argv0);
	exit(2);
}

static long num_arg(const char *s, long lo, long hi, const char *what)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (!*s || *end || v < lo || v > hi)
		die(2, "%s must be a number in [%ld, %ld], not '%s'", what, lo,
		    hi, s);
	return v;
}

/* What the command line asks for. */
struct config {
	int runs;		/* -r: timed runs per way */
	int per_run;		/* -n: datagrams per run */
	double secs;		/* -t: seconds per way of the longer run */
};

/* What was measured, per way. */
struct measured {
	uint64_t *t[NWAYS];	/* ns of each run, sorted */
	uint64_t med[NWAYS], lo[NWAYS], hi[NWAYS];
	uint64_t count[NWAYS], stream_ns[NWAYS];	/* the longer run */
	double pps[NWAYS], kfunc_ns, sys_ns;
};

/* The options into cfg (and dsize, corrupt_seq, drop_seq); 2 on errors. */
static void parse_options(int argc, char **argv, struct config *cfg)
{
	int i;

	cfg->runs = 50;
	cfg->per_run = 100;
	cfg->secs = 2.0;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v)
			usage(argv[0]);
		if (!strcmp(a, "-r"))
			cfg->runs = (int)num_arg(v, 1, 100000, "-r RUNS");
		else if (!strcmp(a, "-n"))
			cfg->per_run = (int)num_arg(v, 1, WINDOW, "-n DATAGRAMS");
		else if (!strcmp(a, "-s"))
			dsize = (size_t)num_arg(v, (long)sizeof(struct hdr), MAX_SIZE,
						"-s BYTES");
		else if (!strcmp(a, "-t")) {
			char *end;

			cfg->secs = strtod(v, &end);
			if (*end || !(cfg->secs > 0 && cfg->secs <= 600))
				die(2, "-t SECONDS must be in (0, 600], not '%s'", v);
		} else if (!strcmp(a, "--corrupt"))
			corrupt_seq = num_arg(v, 0, 1L << 40, "--corrupt SEQ");
		else if (!strcmp(a, "--drop"))
			drop_seq = num_arg(v, 0, 1L << 40, "--drop SEQ");
		else
			usage(argv[0]);
		i++;
	}
}

/*
 * The shared page, the receiver's socket (bound to an ephemeral port on
 * 127.0.0.1, its address in dst) and the receiver process; its pid.
 */
static pid_t start_receiver(void)
{
	socklen_t alen = sizeof(dst);
	int rfd, bufsize;
	pid_t child;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die(3, "mmap: %s", strerror(errno));
	memset(sh, 0, sizeof(*sh));

	rfd = socket(AF_INET, SOCK_DGRAM, 0);
	if (rfd < 0)
		die(3, "socket: %s", strerror(errno));
	dst.sin_family = AF_INET;
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(rfd, (struct sockaddr *)&dst, sizeof(dst)) ||
	    getsockname(rfd, (struct sockaddr *)&dst, &alen))
		die(3, "bind 127.0.0.1: %s", strerror(errno));
	/* room for the window (a datagram's buffer is below 2 * its size) */
	bufsize = (int)((WINDOW + 16) * (dsize + 1024) * 2);
	if (setsockopt(rfd, SOL_SOCKET, SO_RCVBUFFORCE, &bufsize, sizeof(bufsize)) &&
	    setsockopt(rfd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof(bufsize)))
		die(3, "SO_RCVBUF: %s", strerror(errno));

	fflush(stdout);
	child = fork();
	if (child < 0)
		die(3, "fork: %s", strerror(errno));
	if (!child) {
		/* never outlive the sender (it may die on an error) */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
			_exit(3);
		_exit(receiver(rfd));
	}
	close(rfd);
	return child;
}

/* The sender's socket, locked memory and the kernel-side setup. */
static void start_sender(void)
{
	struct sockaddr_in src = { .sin_family = AF_INET };

	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0)
		die(3, "socket: %s", strerror(errno));
	/* an address and port for the headers the driver way writes */
	src.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)))
		die(3, "bind 127.0.0.1: %s", strerror(errno));
	if (mlockall(MCL_CURRENT | MCL_FUTURE))
		die(3, "mlockall: %s (the kernel functions read this process's "
		    "memory and must not fault on it)", strerror(errno));
	kernel_setup();
}

/* The timed runs, the longer run and the call costs, into m. */
static void measure(const struct config *cfg, struct measured *m)
{
	int i, w;

	for (w = 0; w < NWAYS; w++) {
		m->t[w] = calloc((size_t)cfg->runs, sizeof(uint64_t));
		if (!m->t[w])
			die(3, "out of memory");
		timed_run(w, cfg->per_run);	/* warm-up, not counted */
	}
	for (i = 0; i < cfg->runs; i++)
		for (w = 0; w < NWAYS; w++) {	/* rotate the order per run */
			int way = (w + i) % NWAYS;

			m->t[way][i] = timed_run(way, cfg->per_run);
		}
	/* the longer run, in SLICES slices per way, interleaved */
	for (i = 0; i < SLICES; i++)
		for (w = 0; w < NWAYS; w++) {
			int way = (w + i) % NWAYS;

			stream(way, cfg->secs / SLICES, &m->count[way],
			       &m->stream_ns[way]);
		}
	for (w = 0; w < NWAYS; w++) {
		m->pps[w] = (double)m->count[w] * 1e9 / (double)m->stream_ns[w];
		qsort(m->t[w], (size_t)cfg->runs, sizeof(uint64_t), cmp_u64);
		m->med[w] = m->t[w][cfg->runs / 2];
		m->lo[w] = m->t[w][0];
		m->hi[w] = m->t[w][cfg->runs - 1];
	}
	call_costs(&m->kfunc_ns, &m->sys_ns);
}

/*
 * Wait for what is in flight, give the socket back, tell the receiver how
 * many were sent and wait for it; 1 if it did not finish well.
 */
static int stop(pid_t child)
{
	int w, status, err;

	wait_in_flight(0);
	err = kernel_release();
	if (err)
		die(3, "kernel call of fput: %s", kml_kfunc_strerror(err));
	for (w = 0; w < NWAYS; w++)
		sh->sent[w] = seq[w];
	__atomic_store_n(&sh->done, 1, __ATOMIC_RELEASE);
	if (waitpid(child, &status, 0) != child)
		die(3, "waitpid: %s", strerror(errno));
	return !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !sh->finished;
}

/* The tables and the receiver's verdict; the exit status (0 or 1). */
static int report(const struct config *cfg, const struct measured *m,
		  int bad_exit, const char *emu)
{
	unsigned long long missing = 0;
	int w;

	for (w = 0; w < NWAYS; w++)
		missing += sh->missing[w];
	printf("kml-udp: UDP over loopback to 127.0.0.1:%u, datagrams of %zu "
	       "bytes; %d runs of %d datagrams per way (interleaved), then "
	       "%.1f s per way in %d interleaved slices%s%s\n",
	       ntohs(dst.sin_port), dsize, cfg->runs, cfg->per_run, cfg->secs,
	       SLICES, emu ? "; " : "", emu ? emu : "");
	printf("ways: sendto() = the C library's sendto(); sendto() call path "
	       "= sendto through libkml's call path;\n"
	       "      kernel_sendmsg() = one kml_kfunc_call(kernel_sendmsg) per "
	       "datagram on the socket from sockfd_lookup(), fput(sock->file) "
	       "at the end;\n"
	       "      driver = __alloc_skb(), skb_put(), headers and payload "
	       "written by this process, __dev_queue_xmit() to \"%s\" "
	       "(kml_kfunc_call() each)\n", LOOPBACK_DEV);
	printf("BTF layouts: struct msghdr %ld bytes (msg_name@%ld, "
	       "msg_namelen@%ld, msg_flags@%ld), struct kvec %ld bytes "
	       "(iov_base@%ld, iov_len@%ld), socket.file@%ld, sk_buff.dev@%ld, "
	       "sk_buff.protocol@%ld\n\n",
	       L.msghdr_size, L.msg_name, L.msg_namelen, L.msg_flags,
	       L.kvec_size, L.iov_base, L.iov_len, L.sock_file, L.skb_dev,
	       L.skb_protocol);

	printf("| Kernel library benchmark (seed 001 Table 6.4 layout) | Native "
	       "Library Application: sendto() | Kernel Library Application: "
	       "kernel_sendmsg() | Kernel Library Application: driver level "
	       "(__dev_queue_xmit) | %% Benefit (driver vs sendto) |\n");
	printf("|---|---:|---:|---:|---:|\n");
	printf("| Delay for sending %d, %zu-byte packets (ns, median of %d runs) | "
	       "%llu | %llu | %llu | %.1f |\n", cfg->per_run, dsize, cfg->runs,
	       (unsigned long long)m->med[W_SENDTO],
	       (unsigned long long)m->med[W_KERNEL],
	       (unsigned long long)m->med[W_DRIVER],
	       100.0 * ((double)m->med[W_SENDTO] - (double)m->med[W_DRIVER]) /
	       (double)m->med[W_SENDTO]);
	printf("| Datagrams per second (%.1f s per way) | %.0f | %.0f | %.0f | "
	       "%.1f |\n\n", cfg->secs, m->pps[W_SENDTO], m->pps[W_KERNEL],
	       m->pps[W_DRIVER],
	       100.0 * (m->pps[W_DRIVER] - m->pps[W_SENDTO]) / m->pps[W_SENDTO]);

	printf("| Way | ns per run of %d: median | min | max | ns per datagram "
	       "| datagrams/s over %.1f s | datagrams | speed vs sendto() |\n",
	       cfg->per_run, cfg->secs);
	printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
	for (w = 0; w < NWAYS; w++)
		printf("| %s | %llu | %llu | %llu | %llu | %.0f | %llu | %.2fx |\n",
		       way_name[w], (unsigned long long)m->med[w],
		       (unsigned long long)m->lo[w], (unsigned long long)m->hi[w],
		       (unsigned long long)(m->med[w] / (uint64_t)cfg->per_run),
		       m->pps[w], (unsigned long long)m->count[w],
		       m->pps[w] / m->pps[W_SENDTO]);
	printf("\none call of jiffies_to_msecs() through a handle: %.0f ns; "
	       "one getppid() through the call path: %.0f ns (medians of "
	       "2000)\n", m->kfunc_ns, m->sys_ns);

	printf("receiver: ");
	for (w = 0; w < NWAYS; w++)
		printf("%s %llu of %llu%s", way_name[w],
		       (unsigned long long)sh->good[w],
		       (unsigned long long)sh->sent[w], w < NWAYS - 1 ? ", " : "");
	printf(" datagrams verified; %llu bad, %llu duplicate, %llu missing\n",
	       (unsigned long long)sh->bad, (unsigned long long)sh->dup,
	       (unsigned long long)missing);
	if (bad_exit || sh->bad || sh->dup || missing) {
		printf("FAILED: %s\n", sh->first_problem[0] ? sh->first_problem :
		       "the receiver did not finish");
		return 1;
	}
	printf("OK: every payload arrived intact\n");
	printf("kml-udp: kernel-library/sendto = %.2f\n",
	       m->pps[W_DRIVER] / m->pps[W_SENDTO]);
	return 0;
}

int main(int argc, char **argv)
{
	static struct measured m;
	const char *emu = emulated();
	struct config cfg;
	int bad_exit;
	pid_t child;

	parse_options(argc, argv, &cfg);
	if (!kml_kernel_mode())
		die(2, "not running in kernel mode (CPL 3): the kernel functions "
		    "can only be called by a kernel-mode process; run it from "
		    "/trusted as root");

	build_pool();
	child = start_receiver();
	start_sender();
	measure(&cfg, &m);
	bad_exit = stop(child);
	return report(&cfg, &m, bad_exit, emu);
}
