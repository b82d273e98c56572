#include "CCurlShim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

/* The soname of libcurl 7.16 and later, 8.x included. */
#define COURIER_LIBCURL "libcurl.so.4"

/* Each libcurl function courier calls: the table's field, and the symbol. */
#define COURIER_CURL_FUNCTIONS(X)                  \
    X(global_init, curl_global_init)               \
    X(version_info, curl_version_info)             \
    X(getdate, curl_getdate)                       \
    X(free, curl_free)                             \
    X(easy_init, curl_easy_init)                   \
    X(easy_reset, curl_easy_reset)                 \
    X(easy_cleanup, curl_easy_cleanup)             \
    X(easy_pause, curl_easy_pause)                 \
    X(easy_strerror, curl_easy_strerror)           \
    X(easy_setopt, curl_easy_setopt)               \
    X(easy_getinfo, curl_easy_getinfo)             \
    X(slist_append, curl_slist_append)             \
    X(slist_free_all, curl_slist_free_all)         \
    X(multi_init, curl_multi_init)                 \
    X(multi_add_handle, curl_multi_add_handle)     \
    X(multi_remove_handle, curl_multi_remove_handle) \
    X(multi_perform, curl_multi_perform)           \
    X(multi_poll, curl_multi_poll)                 \
    X(multi_timeout, curl_multi_timeout)           \
    X(multi_wakeup, curl_multi_wakeup)             \
    X(multi_info_read, curl_multi_info_read)       \
    X(multi_cleanup, curl_multi_cleanup)           \
    X(multi_setopt, curl_multi_setopt)             \
    X(url, curl_url)                               \
    X(url_cleanup, curl_url_cleanup)               \
    X(url_set, curl_url_set)                       \
    X(url_get, curl_url_get)

/* The fields are not named after the symbols: curl.h defines
   curl_easy_setopt and others as macros too, which a call through a field of
   the same name would expand. */
#define COURIER_CURL_FIELD(field, symbol) __typeof__(symbol) *field;
static struct {
    COURIER_CURL_FUNCTIONS(COURIER_CURL_FIELD)
} libcurl;

static pthread_once_t curl_loaded = PTHREAD_ONCE_INIT;

static void courier_curl_fail(const char *what) {
    fprintf(stderr, "courier: cannot load libcurl (%s): %s\n", COURIER_LIBCURL, what ? what : "unknown error");
    _exit(127);
}

static void courier_curl_load(void) {
    void *library = dlopen(COURIER_LIBCURL, RTLD_NOW | RTLD_LOCAL);
    if (!library) courier_curl_fail(dlerror());
#define COURIER_CURL_RESOLVE(field, symbol)                                  \
    libcurl.field = (__typeof__(symbol) *)dlsym(library, #symbol);         \
    if (!libcurl.field) courier_curl_fail(dlerror());
    COURIER_CURL_FUNCTIONS(COURIER_CURL_RESOLVE)
#undef COURIER_CURL_RESOLVE
}

/* The table, filled: every wrapper starts here. */
static const __typeof__(libcurl) *courier_curl(void) {
    pthread_once(&curl_loaded, courier_curl_load);
    return &libcurl;
}

static void *courier_curl_load_thread(void *unused) {
    (void)unused;
    pthread_once(&curl_loaded, courier_curl_load);
    return NULL;
}

void courier_load_curl_in_background(void) {
    /* The thread inherits the signal mask: with every signal blocked, no
       signal meant for the process is handled on it. */
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    /* Without a thread, the first wrapper called loads libcurl instead. */
    (void)pthread_create(&thread, &attributes, courier_curl_load_thread, NULL);
    pthread_attr_destroy(&attributes);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
}

CURLcode courier_global_init(long flags) { return courier_curl()->global_init(flags); }
curl_version_info_data *courier_version_info(void) { return courier_curl()->version_info(CURLVERSION_NOW); }
time_t courier_getdate(const char *text) { return courier_curl()->getdate(text, NULL); }
void courier_free(void *pointer) { courier_curl()->free(pointer); }

CURL *courier_easy_init(void) { return courier_curl()->easy_init(); }
void courier_easy_reset(CURL *handle) { courier_curl()->easy_reset(handle); }
void courier_easy_cleanup(CURL *handle) { courier_curl()->easy_cleanup(handle); }
CURLcode courier_easy_pause(CURL *handle, int bitmask) { return courier_curl()->easy_pause(handle, bitmask); }
const char *courier_easy_strerror(CURLcode code) { return courier_curl()->easy_strerror(code); }

struct curl_slist *courier_slist_append(struct curl_slist *list, const char *text) { return courier_curl()->slist_append(list, text); }
void courier_slist_free_all(struct curl_slist *list) { courier_curl()->slist_free_all(list); }

CURLM *courier_multi_init(void) { return courier_curl()->multi_init(); }
CURLMcode courier_multi_add_handle(CURLM *multi, CURL *handle) { return courier_curl()->multi_add_handle(multi, handle); }
CURLMcode courier_multi_remove_handle(CURLM *multi, CURL *handle) { return courier_curl()->multi_remove_handle(multi, handle); }
CURLMcode courier_multi_perform(CURLM *multi, int *running) { return courier_curl()->multi_perform(multi, running); }
CURLMcode courier_multi_poll(CURLM *multi, struct curl_waitfd extra_fds[], unsigned int extra_count, int timeout_ms,
                             int *ready) {
    return courier_curl()->multi_poll(multi, extra_fds, extra_count, timeout_ms, ready);
}
CURLMcode courier_multi_timeout(CURLM *multi, long *milliseconds) { return courier_curl()->multi_timeout(multi, milliseconds); }
CURLMcode courier_multi_wakeup(CURLM *multi) { return courier_curl()->multi_wakeup(multi); }
CURLMsg *courier_multi_info_read(CURLM *multi, int *remaining) { return courier_curl()->multi_info_read(multi, remaining); }
CURLMcode courier_multi_cleanup(CURLM *multi) { return courier_curl()->multi_cleanup(multi); }

CURLU *courier_url(void) { return courier_curl()->url(); }
void courier_url_cleanup(CURLU *url) { courier_curl()->url_cleanup(url); }
CURLUcode courier_url_set(CURLU *url, CURLUPart part, const char *content, unsigned int flags) { return courier_curl()->url_set(url, part, content, flags); }
CURLUcode courier_url_get(CURLU *url, CURLUPart part, char **content, unsigned int flags) { return courier_curl()->url_get(url, part, content, flags); }

CURLcode courier_easy_setopt_long(CURL *handle, CURLoption option, long value) { return courier_curl()->easy_setopt(handle, option, value); }
CURLcode courier_easy_setopt_ptr(CURL *handle, CURLoption option, const void *value) { return courier_curl()->easy_setopt(handle, option, value); }
CURLcode courier_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value) { return courier_curl()->easy_setopt(handle, option, value); }
CURLcode courier_easy_setopt_data_callback(CURL *handle, CURLoption option, courier_data_callback callback) { return courier_curl()->easy_setopt(handle, option, callback); }
CURLcode courier_easy_setopt_xferinfo_callback(CURL *handle, courier_xferinfo_callback callback) { return courier_curl()->easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback); }

CURLcode courier_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) { return courier_curl()->easy_getinfo(handle, info, value); }
CURLcode courier_easy_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value) { return courier_curl()->easy_getinfo(handle, info, value); }
CURLcode courier_easy_getinfo_double(CURL *handle, CURLINFO info, double *value) { return courier_curl()->easy_getinfo(handle, info, value); }
CURLcode courier_easy_getinfo_string(CURL *handle, CURLINFO info, const char **value) { return courier_curl()->easy_getinfo(handle, info, value); }
CURLcode courier_easy_getinfo_ptr(CURL *handle, CURLINFO info, void **value) { return courier_curl()->easy_getinfo(handle, info, value); }

CURLMcode courier_multi_setopt_long(CURLM *multi, CURLMoption option, long value) { return courier_curl()->multi_setopt(multi, option, value); }

CURLcode courier_msg_result(const CURLMsg *message) { return message->data.result; }

size_t courier_writefunc_pause(void) { return CURL_WRITEFUNC_PAUSE; }
int courier_pause_all(void) { return CURLPAUSE_ALL; }
int courier_pause_cont(void) { return CURLPAUSE_CONT; }
