// HTTP/1.1 requests over a POSIX socket (see http_client.h).
#include "engine/run/http_client.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

namespace lathe {

namespace {

struct Url {
  std::string host, port = "80", path = "/";
};

Url parse_url(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0)
    throw Error("HTTP request to " + url + ": only http:// URLs are supported");
  Url u;
  const std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos)
    u.path = rest.substr(slash);
  const size_t colon = authority.rfind(':');
  u.host = authority.substr(0, colon);
  if (colon != std::string::npos)
    u.port = authority.substr(colon + 1);
  if (u.host.empty() || u.port.empty())
    throw Error("HTTP request to " + url + ": no host or port");
  return u;
}

// Closes the socket on every path out.
struct Socket {
  int fd = -1;
  ~Socket() {
    if (fd >= 0)
      ::close(fd);
  }
};

std::string lower(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string decode_chunked(const std::string& body, const std::string& url) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t eol = body.find("\r\n", pos);
    if (eol == std::string::npos)
      throw Error("HTTP reply from " + url + ": truncated chunked body");
    const size_t n = std::stoul(body.substr(pos, eol - pos), nullptr, 16);
    pos = eol + 2;
    if (n == 0)
      return out;
    if (pos + n > body.size())
      throw Error("HTTP reply from " + url + ": truncated chunked body");
    out.append(body, pos, n);
    pos += n + 2;
  }
}

}  // namespace

HttpResponse http_request(const std::string& method, const std::string& url, const HttpHeaders& headers,
                          const std::string& body, double timeout_s) {
  const Url u = parse_url(url);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(u.host.c_str(), u.port.c_str(), &hints, &found); rc != 0)
    throw Error("HTTP request to " + url + ": cannot resolve " + u.host + ": " + ::gai_strerror(rc));
  Socket sock;
  std::string last_error = "no address";
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_s);
  tv.tv_usec = static_cast<suseconds_t>((timeout_s - static_cast<double>(tv.tv_sec)) * 1e6);
  for (addrinfo* a = found; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    // On Linux SO_SNDTIMEO bounds connect() as well.
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      sock.fd = fd;
      break;
    }
    last_error = errno == EINPROGRESS ? "connection timed out" : std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (sock.fd < 0)
    throw Error("HTTP request to " + url + ": cannot connect: " + last_error);

  std::string request = method + " " + u.path + " HTTP/1.1\r\nHost: " + u.host + "\r\nConnection: close\r\n";
  for (const auto& [k, v] : headers)
    request += k + ": " + v + "\r\n";
  if (!body.empty() || method == "PUT" || method == "POST")
    request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  request += "\r\n" + body;
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(sock.fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw Error("HTTP request to " + url +
                  ": sending failed: " + (errno == EAGAIN ? std::string("timed out") : std::strerror(errno)));
    sent += static_cast<size_t>(n);
  }

  std::string reply;
  char buf[4096];
  while (true) {
    const ssize_t n = ::recv(sock.fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw Error("HTTP request to " + url +
                  ": no reply: " + (errno == EAGAIN ? std::string("timed out") : std::strerror(errno)));
    if (n == 0)
      break;
    reply.append(buf, static_cast<size_t>(n));
    if (reply.size() > (1u << 20))
      throw Error("HTTP reply from " + url + " is over 1 MiB");
  }

  const size_t head_end = reply.find("\r\n\r\n");
  if (reply.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos || reply.size() < 12)
    throw Error("HTTP reply from " + url + " is not HTTP: '" + reply.substr(0, 40) + "'");
  HttpResponse r;
  r.status = std::atoi(reply.c_str() + 9);
  const std::string head = lower(reply.substr(0, head_end));
  r.body = reply.substr(head_end + 4);
  if (head.find("\r\ntransfer-encoding: chunked") != std::string::npos) {
    r.body = decode_chunked(r.body, url);
  } else if (const size_t cl = head.find("\r\ncontent-length:"); cl != std::string::npos) {
    const size_t n = std::stoul(head.substr(cl + 17));
    if (r.body.size() < n)
      throw Error("HTTP reply from " + url + ": body is " + std::to_string(r.body.size()) +
                  " bytes, Content-Length says " + std::to_string(n));
    r.body.resize(n);
  }
  return r;
}

}  // namespace lathe
