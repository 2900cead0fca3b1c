"""Which transport lists a remote logdir and fetches its bytes into its mirror (``_mirror``):
the native one (Rust ``object_store``, ``_core.S3Fetcher``) for ``s3://`` when every storage
option given maps onto it, fsspec for everything else (``docs/scale.md`` says why and what it measured).

``TBSCOPE_REMOTE_TRANSPORT`` (or the storage option ``transport``) is ``auto`` (the default),
``native`` (an error when it cannot be used, saying why) or ``fsspec``. The transport lists
the logdir too (a refresh's one listing), so a native read of ``s3://`` neither imports s3fs nor
makes its client: fsspec is made only for a key the native client spells otherwise.

Credentials follow s3fs's rules so that both transports read the same objects as the same
user: ``key``/``secret``/``token`` (or ``username``/``password``) when given, ``anon=True``
for unsigned requests, else botocore's credential chain (environment, ``~/.aws`` profiles,
``profile=``, SSO, instance roles), resolved here and handed to the native client, refreshed
each refresh (temporary credentials expire). The endpoint: ``endpoint_url``,
``client_kwargs={"endpoint_url": ...}``, ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, or the
profile's ``endpoint_url``; the region: ``client_kwargs={"region_name": ...}``, then botocore's
(``AWS_DEFAULT_REGION``, the profile), then ``AWS_REGION``, else asked of AWS (or any name
for another endpoint).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ENV", "NativeS3", "choose"]

ENV = "TBSCOPE_REMOTE_TRANSPORT"
MODES = ("auto", "native", "fsspec")

#: s3fs options that change nothing about how an object's bytes are fetched.
_INERT = {
    "skip_instance_cache",
    "use_listings_cache",
    "listings_expiry_time",
    "max_paths",
    "default_block_size",
    "default_fill_cache",
    "default_cache_type",
    "cache_regions",
    "max_concurrency",
    "fixed_upload_size",
    "local_expiry_check",
    "asynchronous",
    "loop",
}
_MAPPED = {"key", "secret", "token", "username", "password", "anon", "endpoint_url", "client_kwargs"}
_MAPPED |= {"config_kwargs", "profile", "use_ssl", "version_aware", "requester_pays"}


class Unsupported(Exception):
    """The native transport cannot honour these options (the reason is the message)."""


def mode(options: dict[str, Any]) -> str:
    """The transport asked for: the storage option ``transport`` (removed from ``options``),
    else the environment variable, else ``auto``."""
    asked = options.pop("transport", None) or os.environ.get(ENV) or "auto"
    asked = str(asked).strip().lower()
    if asked not in MODES:
        raise ValueError(f"transport {asked!r} (storage option 'transport' or {ENV}): use one of {', '.join(MODES)}")
    return asked


def choose(url: str, options: Mapping[str, Any], asked: str) -> NativeS3 | None:
    """The native transport for ``url`` with these storage options, or None for fsspec.
    ``asked == "native"`` raises ValueError, saying why, where ``auto`` falls back."""
    if asked == "fsspec":
        return None
    try:
        scheme = url.split("://", 1)[0].lower()
        if scheme not in ("s3", "s3a"):
            raise Unsupported(f"the native transport reads s3:// only, not {scheme}://")
        return NativeS3(options)
    except Unsupported as e:
        if asked == "native":
            raise ValueError(f"{url}: transport 'native' asked for, but {e}") from None
        return None


def _str(options: Mapping[str, Any], name: str) -> str | None:
    v = options.get(name)
    if v is None:
        return None
    if not isinstance(v, str):
        raise Unsupported(f"storage option {name}={v!r} is not a string")
    return v or None


class NativeS3:
    """The storage options of one S3 logdir, mapped onto ``_core.S3Fetcher`` (Unsupported if
    any cannot be); :meth:`fetcher` gives a client of a bucket with current credentials."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        unknown = sorted(set(options) - _INERT - _MAPPED)
        if unknown:
            raise Unsupported(f"storage options {', '.join(unknown)} are not mapped onto it")
        client = options.get("client_kwargs") or {}
        if not isinstance(client, Mapping) or set(client) - {"endpoint_url", "region_name"}:
            raise Unsupported(f"client_kwargs={client!r} has more than endpoint_url and region_name")
        config = options.get("config_kwargs") or {}
        if not isinstance(config, Mapping) or set(config) - {"retries"}:
            raise Unsupported(f"config_kwargs={config!r} has more than retries")
        retries = config.get("retries") or {}
        if not isinstance(retries, Mapping) or set(retries) - {"max_attempts", "total_max_attempts", "mode"}:
            raise Unsupported(f"config_kwargs retries={retries!r}")
        attempts = retries.get("total_max_attempts", retries.get("max_attempts"))
        if options.get("version_aware") or options.get("requester_pays"):
            raise Unsupported("version_aware and requester_pays are not mapped onto it")
        #: Tries inside the client after the first (the mirror retries each piece too).
        self.retries = 2 if attempts is None else max(0, int(attempts) - 1)
        self.anonymous = bool(options.get("anon", False))
        self.key = _str(options, "key") or _str(options, "username")
        self.secret = _str(options, "secret") or _str(options, "password")
        self.token = _str(options, "token")
        self.profile = _str(options, "profile")
        self._session: Any = None
        self._credentials: Any = None
        self.endpoint = _str(options, "endpoint_url") or _str(client, "endpoint_url") or self._configured_endpoint()
        self.region = _str(client, "region_name") or self._configured("region") or os.environ.get("AWS_REGION")
        if self.endpoint is not None and "://" not in self.endpoint:
            self.endpoint = ("https://" if options.get("use_ssl", True) else "http://") + self.endpoint
        elif self.endpoint is None and options.get("use_ssl", True) is False:
            raise Unsupported("use_ssl=False without an endpoint_url")
        if not self.anonymous and not (self.key and self.secret) and self._chain() is None:
            # s3fs fails the same way, with botocore's words: let it say so.
            raise Unsupported("botocore's credential chain found no credentials")
        self._clients: dict[str, tuple[tuple[int | str | None, ...], Any]] = {}

    def _botocore(self) -> Any:
        if self._session is None:
            try:
                import botocore.session
            except ImportError:
                raise Unsupported("botocore (which s3fs brings) is not installed") from None
            self._session = botocore.session.Session(profile=self.profile)
        return self._session

    def _configured_endpoint(self) -> str | None:
        """The endpoint AWS's configuration gives S3: ``AWS_ENDPOINT_URL_S3``,
        ``AWS_ENDPOINT_URL``, then the profile's ``endpoint_url`` (none of them when
        ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true``)."""
        if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
            return None
        env = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if env:
            return env
        try:
            scoped = self._botocore().get_scoped_config()
        except Exception as e:  # noqa: BLE001 - a broken profile: fsspec says what is wrong
            raise Unsupported(f"the AWS profile could not be read: {e}") from None
        if "services" in scoped:
            raise Unsupported("the AWS profile has a services section (per-service endpoints)")
        v = scoped.get("endpoint_url")
        return str(v) if v else None

    def _configured(self, name: str) -> str | None:
        """A setting of botocore's configuration (environment, then the profile)."""
        try:
            v = self._botocore().get_config_variable(name)
        except Exception as e:  # noqa: BLE001 - a broken profile: fsspec says what is wrong
            raise Unsupported(f"the AWS profile could not be read: {e}") from None
        return str(v) if v else None

    def _chain(self) -> Any:
        """botocore's credentials object (it refreshes temporary ones), or None."""
        if self._credentials is None:
            try:
                self._credentials = self._botocore().get_credentials()
            except Exception as e:  # noqa: BLE001 - e.g. an SSO profile logged out
                raise Unsupported(f"botocore's credential chain failed: {type(e).__name__}: {e}") from None
        return self._credentials

    def _identity(self) -> tuple[str | None, str | None, str | None]:
        if self.anonymous:
            return None, None, None
        if self.key and self.secret:
            return self.key, self.secret, self.token
        frozen = self._chain().get_frozen_credentials()
        return frozen.access_key, frozen.secret_key, frozen.token

    def fetcher(self, bucket: str) -> Any:
        """A client of ``bucket`` with the credentials valid now (made again when they
        changed)."""
        from tbscope._core import S3Fetcher

        key, secret, token = self._identity()
        made = self._clients.get(bucket)
        # A client's connections belong to its process: a forked child makes its own.
        if made is None or made[0] != (os.getpid(), key, secret, token):
            client = S3Fetcher(
                bucket,
                region=self.region,
                endpoint=self.endpoint,
                key_id=key,
                secret=secret,
                token=token,
                anonymous=self.anonymous,
                retries=self.retries,
            )
            made = ((os.getpid(), key, secret, token), client)
            self._clients[bucket] = made
        return made[1]

    def piece_writer(self, bucket: str) -> Callable[[str, int, int, int], int]:
        """``write(path, start, end, fd)`` as the mirror calls it: ``path`` is ``bucket/key``."""
        client = self.fetcher(bucket)

        def write(path: str, start: int, end: int, fd: int) -> int:
            return int(client.get_into(path.split("/", 1)[1], start, end, fd))

        return write
