#ifndef COURIER_CCURLSHIM_H
#define COURIER_CCURLSHIM_H

#include <curl/curl.h>

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

CURLcode courier_easy_setopt_data_callback(CURL *handle, CURLoption option, courier_data_callback callback);

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

/* CURLVERSION_NOW is a macro naming the newest struct version. */
curl_version_info_data *courier_version_info(void);

#endif
