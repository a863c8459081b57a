#include "core/x509/pem.h"

#include <climits>
#include <ctime>

namespace rosetctl {
namespace {

// A passphrase callback that declines: without one libcrypto would prompt on the terminal.
int decline_passphrase(char*, int, int, void*) {
  return -1;
}

Expected<BioPtr> reading_bio(std::string_view text) {
  if (text.size() > INT_MAX) return error(Code::kInvalidArgument, "PEM text too large");
  BioPtr bio(libcrypto_x509().BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  if (!bio) return libcrypto_error("cannot make a memory BIO");
  return bio;
}

// The bytes written to a memory BIO so far.
std::string_view written_text(BIO* bio) {
  char* data = nullptr;
  long length = libcrypto_x509().BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data);  // BIO_get_mem_data
  if (data == nullptr || length <= 0) return {};
  return {data, static_cast<std::size_t>(length)};
}

}  // namespace

Expected<X509Ptr> certificate_from_pem(std::string_view pem, std::string_view what) {
  auto bio = reading_bio(pem);
  if (!bio) return bio.status();
  X509Ptr certificate(libcrypto_x509().PEM_read_bio_X509(bio->get(), nullptr, nullptr, nullptr));
  if (!certificate) {
    libcrypto_x509().ERR_clear_error();
    return error(Code::kInvalidArgument, "{} holds no PEM certificate", what);
  }
  return certificate;
}

Expected<EvpPkeyPtr> private_key_from_pem(const SecretText& pem, std::string_view what) {
  auto bio = reading_bio(pem.view());
  if (!bio) return bio.status();
  EvpPkeyPtr key(
      libcrypto_x509().PEM_read_bio_PrivateKey(bio->get(), nullptr, decline_passphrase, nullptr));
  if (!key) {
    libcrypto_x509().ERR_clear_error();
    return error(Code::kInvalidArgument, "{} holds no unencrypted PEM private key", what);
  }
  return key;
}

Expected<std::string> certificate_to_pem(X509* certificate) {
  BioPtr bio(libcrypto_x509().BIO_new(libcrypto_x509().BIO_s_mem()));
  if (!bio || libcrypto_x509().PEM_write_bio_X509(bio.get(), certificate) != 1) {
    return libcrypto_error("cannot write a certificate as PEM");
  }
  return std::string(written_text(bio.get()));
}

Expected<X509ReqPtr> request_from_pem(std::string_view pem, std::string_view what) {
  auto bio = reading_bio(pem);
  if (!bio) return bio.status();
  X509ReqPtr request(libcrypto_x509().PEM_read_bio_X509_REQ(bio->get(), nullptr, nullptr, nullptr));
  if (!request) {
    libcrypto_x509().ERR_clear_error();
    return error(Code::kInvalidArgument, "{} holds no PEM certificate request", what);
  }
  return request;
}

Expected<std::string> request_to_pem(X509_REQ* request) {
  BioPtr bio(libcrypto_x509().BIO_new(libcrypto_x509().BIO_s_mem()));
  if (!bio || libcrypto_x509().PEM_write_bio_X509_REQ(bio.get(), request) != 1) {
    return libcrypto_error("cannot write a certificate request as PEM");
  }
  return std::string(written_text(bio.get()));
}

Expected<SecretText> private_key_to_pem(EVP_PKEY* key) {
  // Secure memory BIO: its buffer is cleansed when freed.
  BioPtr bio(libcrypto_x509().BIO_new(libcrypto_x509().BIO_s_secmem()));
  if (!bio || libcrypto_x509().PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0,
                                                        nullptr, nullptr) != 1) {
    return libcrypto_error("cannot write a private key as PEM");
  }
  return SecretText(std::string(written_text(bio.get())));
}

Expected<int64_t> unix_time_of(const ASN1_TIME* time) {
  struct tm broken_down = {};
  if (time == nullptr || libcrypto_x509().ASN1_TIME_to_tm(time, &broken_down) != 1) {
    return libcrypto_error("cannot read a certificate time");
  }
  return static_cast<int64_t>(::timegm(&broken_down));
}

}  // namespace rosetctl
