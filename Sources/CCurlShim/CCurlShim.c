#include "CCurlShim.h"

CURLcode courier_easy_setopt_long(CURL *handle, CURLoption option, long value) { return curl_easy_setopt(handle, option, value); }
CURLcode courier_easy_setopt_ptr(CURL *handle, CURLoption option, const void *value) { return curl_easy_setopt(handle, option, value); }
CURLcode courier_easy_setopt_off(CURL *handle, CURLoption option, curl_off_t value) { return curl_easy_setopt(handle, option, value); }
CURLcode courier_easy_setopt_data_callback(CURL *handle, CURLoption option, courier_data_callback callback) { return curl_easy_setopt(handle, option, callback); }

CURLcode courier_easy_getinfo_string(CURL *handle, CURLINFO info, const char **value) { return curl_easy_getinfo(handle, info, value); }
CURLcode courier_easy_getinfo_ptr(CURL *handle, CURLINFO info, void **value) { return curl_easy_getinfo(handle, info, value); }

CURLMcode courier_multi_setopt_long(CURLM *multi, CURLMoption option, long value) { return curl_multi_setopt(multi, option, value); }

CURLcode courier_msg_result(const CURLMsg *message) { return message->data.result; }

size_t courier_writefunc_pause(void) { return CURL_WRITEFUNC_PAUSE; }
int courier_pause_all(void) { return CURLPAUSE_ALL; }
int courier_pause_cont(void) { return CURLPAUSE_CONT; }

curl_version_info_data *courier_version_info(void) { return curl_version_info(CURLVERSION_NOW); }
