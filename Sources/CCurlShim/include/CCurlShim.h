#ifndef COURIER_CCURLSHIM_H
#define COURIER_CCURLSHIM_H

#include <curl/curl.h>

/*
 * courier loads libcurl at run time (dlopen) rather than linking it: loading
 * libcurl and the thirty-odd libraries it needs (TLS, GSS-API, LDAP, SSH,
 * IDN...) is most of the time `curl --version` takes, and a linked libcurl
 * would be loaded before main runs, ahead of everything else courier does at
 * start-up. courier_load_curl_in_background starts that load on a thread of
 * its own so that it overlaps the rest of start-up; every libcurl function
 * courier calls goes through one of the wrappers below, and the first one
 * called waits for the load to end (or loads the library itself). A libcurl
 * that cannot be loaded ends the process with status 127, as the dynamic
 * linker would have, after saying why on stderr.
 */

/* Starts loading libcurl on a detached thread, with every signal blocked,
   and returns at once. Calling it is optional: the first wrapper called
   loads libcurl when no load has started. */
void courier_load_curl_in_background(void);

CURLcode courier_global_init(long flags);
curl_version_info_data *courier_version_info(void);
time_t courier_getdate(const char *text);
void courier_free(void *pointer);

CURL *courier_easy_init(void);
void courier_easy_reset(CURL *handle);
void courier_easy_cleanup(CURL *handle);
CURLcode courier_easy_pause(CURL *handle, int bitmask);
const char *courier_easy_strerror(CURLcode code);

struct curl_slist *courier_slist_append(struct curl_slist *list, const char *text);
void courier_slist_free_all(struct curl_slist *list);

CURLM *courier_multi_init(void);
CURLMcode courier_multi_add_handle(CURLM *multi, CURL *handle);
CURLMcode courier_multi_remove_handle(CURLM *multi, CURL *handle);
CURLMcode courier_multi_perform(CURLM *multi, int *running);
CURLMcode courier_multi_poll(CURLM *multi, struct curl_waitfd extra_fds[], unsigned int extra_count, int timeout_ms,
                             int *ready);
CURLMcode courier_multi_timeout(CURLM *multi, long *milliseconds);
CURLMcode courier_multi_wakeup(CURLM *multi);
CURLMsg *courier_multi_info_read(CURLM *multi, int *remaining);
CURLMcode courier_multi_cleanup(CURLM *multi);

CURLU *courier_url(void);
void courier_url_cleanup(CURLU *url);
CURLUcode courier_url_set(CURLU *url, CURLUPart part, const char *content, unsigned int flags);
CURLUcode courier_url_get(CURLU *url, CURLUPart part, char **content, unsigned int flags);

/*
 * curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic C
 * functions, which Swift cannot call. Each wrapper below fixes the type of the
 * variadic argument, one per argument kind libcurl documents for the options
 * courier uses.
 */

CURLcode courier_easy_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode courier_easy_setopt_ptr(CURL *handle, CURLoption option, const void *value);
CURLcode courier_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value);

typedef size_t (*courier_data_callback)(char *buffer, size_t size, size_t count, void *userdata);
typedef int (*courier_xferinfo_callback)(void *userdata, curl_off_t dltotal, curl_off_t dlnow,
                                         curl_off_t ultotal, curl_off_t ulnow);

CURLcode courier_easy_setopt_data_callback(CURL *handle, CURLoption option, courier_data_callback callback);
CURLcode courier_easy_setopt_xferinfo_callback(CURL *handle, courier_xferinfo_callback callback);

CURLcode courier_easy_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode courier_easy_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value);
CURLcode courier_easy_getinfo_double(CURL *handle, CURLINFO info, double *value);
CURLcode courier_easy_getinfo_string(CURL *handle, CURLINFO info, const char **value);
CURLcode courier_easy_getinfo_ptr(CURL *handle, CURLINFO info, void **value);

CURLMcode courier_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

/* CURLMsg.data is a union; Swift sees its members, but reading the result
   through a function keeps that detail in C. */
CURLcode courier_msg_result(const CURLMsg *message);

/* CURL_WRITEFUNC_PAUSE and CURLPAUSE_* are macros built from expressions
   Swift does not import. */
size_t courier_writefunc_pause(void);
int courier_pause_all(void);
int courier_pause_cont(void);

#endif
