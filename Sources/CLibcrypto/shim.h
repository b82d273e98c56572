// OpenSSL's message digests (SHA-256, SHA-384, SHA-512) through its EVP
// interface: the libcrypto libcurl already loads.
#include <openssl/evp.h>
