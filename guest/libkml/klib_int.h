/* SPDX-License-Identifier: GPL-2.0 */
/* libkml klib: internals shared by its archive members. */
#ifndef KML_KLIB_INT_H
#define KML_KLIB_INT_H

#define KML__HIDDEN	__attribute__((visibility("hidden")))

/* Set the thread's message (printf format) and errno; returns -err. */
KML__HIDDEN int kml__fail(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Set the thread's message to msg and errno to err. */
KML__HIDDEN void kml__set_error(const char *msg, int err);

#endif /* KML_KLIB_INT_H */
