// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libmicrohttpd, loaded when the daemon starts its HTTP server rather than at every exec: the
 * library and the TLS stack it links (gnutls and eight more) cost each `pipeprof -p` and `hist`
 * ~7 ms of CPU to map and relocate (3.7 against 10.8 ms for an empty program linked with the
 * same libraries and without it, on the development VM), a seventh of the attach budget, for a
 * server only the daemon runs. These are the functions http.c calls, with the library's own
 * prototypes (from its header), forwarding to it once loaded.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <microhttpd.h>

#define MHD_SONAME "libmicrohttpd.so.12"

static struct {
	struct MHD_Daemon *(*start_daemon_va)(unsigned int, uint16_t, MHD_AcceptPolicyCallback,
					       void *, MHD_AccessHandlerCallback, void *, va_list);
	void (*stop_daemon)(struct MHD_Daemon *);
	enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
	struct MHD_Response *(*create_response_from_buffer)(size_t, void *,
							    enum MHD_ResponseMemoryMode);
	void (*destroy_response)(struct MHD_Response *);
	const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *,
							       enum MHD_ConnectionInfoType, ...);
	int (*get_connection_values)(struct MHD_Connection *, enum MHD_ValueKind,
				     MHD_KeyValueIterator, void *);
	const char *(*lookup_connection_value)(struct MHD_Connection *, enum MHD_ValueKind,
					       const char *);
	enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int,
					  struct MHD_Response *);
} mhd;
static bool mhd_loaded;

/* Called first by MHD_start_daemon(), from the thread that starts the server and before any of
 * its threads exist: the other wrappers only run inside the server's callbacks. */
static bool mhd_load(void)
{
	void *lib;

	if (mhd_loaded)
		return true;
	lib = dlopen(MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "pipeprof: cannot load %s (the daemon's HTTP server): %s\n",
			MHD_SONAME, dlerror());
		return false;
	}
#define RESOLVE(field, name) \
	if (!(*(void **)&mhd.field = dlsym(lib, name))) goto missing
	RESOLVE(start_daemon_va, "MHD_start_daemon_va");
	RESOLVE(stop_daemon, "MHD_stop_daemon");
	RESOLVE(add_response_header, "MHD_add_response_header");
	RESOLVE(create_response_from_buffer, "MHD_create_response_from_buffer");
	RESOLVE(destroy_response, "MHD_destroy_response");
	RESOLVE(get_connection_info, "MHD_get_connection_info");
	RESOLVE(get_connection_values, "MHD_get_connection_values");
	RESOLVE(lookup_connection_value, "MHD_lookup_connection_value");
	RESOLVE(queue_response, "MHD_queue_response");
#undef RESOLVE
	mhd_loaded = true;
	return true;
missing:
	fprintf(stderr, "pipeprof: %s lacks a function pipeprof calls: %s\n", MHD_SONAME, dlerror());
	dlclose(lib);
	return false;
}

struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port,
				    MHD_AcceptPolicyCallback apc, void *apc_cls,
				    MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
	struct MHD_Daemon *d;
	va_list ap;

	if (!mhd_load()) {
		errno = ELIBACC;
		return NULL;
	}
	va_start(ap, dh_cls);
	d = mhd.start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
}

void MHD_stop_daemon(struct MHD_Daemon *daemon)
{
	if (mhd_loaded)
		mhd.stop_daemon(daemon);
}

enum MHD_Result MHD_add_response_header(struct MHD_Response *response, const char *header,
					const char *content)
{
	return mhd_loaded ? mhd.add_response_header(response, header, content) : MHD_NO;
}

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer,
						     enum MHD_ResponseMemoryMode mode)
{
	return mhd_loaded ? mhd.create_response_from_buffer(size, buffer, mode) : NULL;
}

void MHD_destroy_response(struct MHD_Response *response)
{
	if (mhd_loaded)
		mhd.destroy_response(response);
}

/* Only the kinds of information that take no further argument are asked for (the socket
 * context, the connection's descriptor). */
const union MHD_ConnectionInfo *MHD_get_connection_info(struct MHD_Connection *connection,
							enum MHD_ConnectionInfoType info_type, ...)
{
	return mhd_loaded ? mhd.get_connection_info(connection, info_type) : NULL;
}

int MHD_get_connection_values(struct MHD_Connection *connection, enum MHD_ValueKind kind,
			      MHD_KeyValueIterator iterator, void *iterator_cls)
{
	return mhd_loaded ? mhd.get_connection_values(connection, kind, iterator, iterator_cls) : -1;
}

const char *MHD_lookup_connection_value(struct MHD_Connection *connection,
					enum MHD_ValueKind kind, const char *key)
{
	return mhd_loaded ? mhd.lookup_connection_value(connection, kind, key) : NULL;
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status_code,
				   struct MHD_Response *response)
{
	return mhd_loaded ? mhd.queue_response(connection, status_code, response) : MHD_NO;
}
