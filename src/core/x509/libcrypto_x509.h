// The part of libcrypto that certificate work needs, loaded with dlopen at the first `rosetctl
// tls` command: linked, libcrypto costs every rosetctl run ~120 page faults and 1.2 MiB resident
// (measured on `rosetctl --version`), and only `tls` uses it (core/shared_library.h). The table
// is checked at compile time against OpenSSL 3's headers (decltype of each function).
#pragma once

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "core/status.h"

namespace rosetctl {

// Only real functions: a header macro (BIO_get_mem_data, sk_GENERAL_NAME_num, OPENSSL_free)
// would expand to a direct call, which the rosetctl link then reports as undefined.
#define ROSETCTL_LIBCRYPTO_X509_FUNCTIONS(X) \
  X(ASN1_INTEGER_to_BN)                      \
  X(ASN1_STRING_get0_data)                   \
  X(ASN1_STRING_length)                      \
  X(ASN1_STRING_to_UTF8)                     \
  X(ASN1_TIME_to_tm)                         \
  X(BIO_ctrl)                                \
  X(BIO_free)                                \
  X(BIO_new)                                 \
  X(BIO_new_mem_buf)                         \
  X(BIO_s_mem)                               \
  X(BIO_s_secmem)                            \
  X(BN_bn2hex)                               \
  X(BN_free)                                 \
  X(BN_new)                                  \
  X(BN_rand)                                 \
  X(BN_to_ASN1_INTEGER)                      \
  X(CRYPTO_free)                             \
  X(ERR_clear_error)                         \
  X(ERR_error_string_n)                      \
  X(ERR_get_error)                           \
  X(EVP_PKEY_Q_keygen)                       \
  X(EVP_PKEY_free)                           \
  X(EVP_PKEY_get_bits)                       \
  X(EVP_PKEY_is_a)                           \
  X(EVP_sha256)                              \
  X(GENERAL_NAMES_free)                      \
  X(OBJ_nid2sn)                              \
  X(OBJ_obj2nid)                             \
  X(OPENSSL_sk_num)                          \
  X(OPENSSL_sk_value)                        \
  X(PEM_read_bio_PrivateKey)                 \
  X(PEM_read_bio_X509)                       \
  X(PEM_read_bio_X509_REQ)                   \
  X(PEM_write_bio_PrivateKey)                \
  X(PEM_write_bio_X509)                      \
  X(PEM_write_bio_X509_REQ)                  \
  X(X509V3_EXT_conf_nid)                     \
  X(X509V3_set_ctx)                          \
  X(X509_EXTENSION_free)                     \
  X(X509_NAME_ENTRY_get_data)                \
  X(X509_NAME_ENTRY_get_object)              \
  X(X509_NAME_add_entry_by_txt)              \
  X(X509_NAME_entry_count)                   \
  X(X509_NAME_get_entry)                     \
  X(X509_add_ext)                            \
  X(X509_check_ca)                           \
  X(X509_check_private_key)                  \
  X(X509_free)                               \
  X(X509_get0_notAfter)                      \
  X(X509_get0_notBefore)                     \
  X(X509_get0_serialNumber)                  \
  X(X509_get_ext_d2i)                        \
  X(X509_get_extended_key_usage)             \
  X(X509_get_issuer_name)                    \
  X(X509_get_serialNumber)                   \
  X(X509_get_subject_name)                   \
  X(X509_getm_notAfter)                      \
  X(X509_getm_notBefore)                     \
  X(X509_REQ_free)                           \
  X(X509_REQ_get0_pubkey)                    \
  X(X509_REQ_new)                            \
  X(X509_REQ_set_pubkey)                     \
  X(X509_REQ_set_version)                    \
  X(X509_REQ_sign)                           \
  X(X509_REQ_verify)                         \
  X(X509_new)                                \
  X(X509_set_issuer_name)                    \
  X(X509_set_pubkey)                         \
  X(X509_set_version)                        \
  X(X509_sign)                               \
  X(X509_time_adj_ex)

struct LibcryptoX509 {
#define ROSETCTL_LIBCRYPTO_SLOT(name) decltype(&::name) name = nullptr;
  ROSETCTL_LIBCRYPTO_X509_FUNCTIONS(ROSETCTL_LIBCRYPTO_SLOT)
#undef ROSETCTL_LIBCRYPTO_SLOT
};

// Loads libcrypto.so.3 once per process. UNAVAILABLE naming the package (libssl3) when it is
// missing or too old; later calls return the same answer.
Expected<const LibcryptoX509*> load_libcrypto_x509();

// The loaded table. Only for code that holds an object made through it (so loading succeeded):
// the deleters below.
const LibcryptoX509& libcrypto_x509();

// unique_ptr deleter calling one of the table's free functions.
template <auto Free>
struct LibcryptoFree {
  template <typename T>
  void operator()(T* object) const {
    (libcrypto_x509().*Free)(object);
  }
};

using BioPtr = std::unique_ptr<BIO, LibcryptoFree<&LibcryptoX509::BIO_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, LibcryptoFree<&LibcryptoX509::BN_free>>;
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, LibcryptoFree<&LibcryptoX509::EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, LibcryptoFree<&LibcryptoX509::X509_free>>;
using X509ReqPtr = std::unique_ptr<X509_REQ, LibcryptoFree<&LibcryptoX509::X509_REQ_free>>;
using X509ExtensionPtr =
    std::unique_ptr<X509_EXTENSION, LibcryptoFree<&LibcryptoX509::X509_EXTENSION_free>>;
using GeneralNamesPtr =
    std::unique_ptr<GENERAL_NAMES, LibcryptoFree<&LibcryptoX509::GENERAL_NAMES_free>>;

// Memory libcrypto allocated for us (BN_bn2hex, ASN1_STRING_to_UTF8): OPENSSL_free is a macro.
struct LibcryptoMemoryFree {
  void operator()(void* memory) const { libcrypto_x509().CRYPTO_free(memory, __FILE__, __LINE__); }
};
using LibcryptoString = std::unique_ptr<char, LibcryptoMemoryFree>;

// INTERNAL "<what>: <libcrypto's reasons>", emptying libcrypto's error queue. The reasons are
// library texts ("bad decrypt", "no start line"), never data.
Status libcrypto_error(std::string_view what);

}  // namespace rosetctl
