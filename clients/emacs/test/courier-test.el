;;; courier-test.el --- Drives courier.el against a local origin  -*- lexical-binding: t; coding: utf-8 -*-

;;; Commentary:

;; Run: emacs --batch -Q -L clients/emacs -l clients/emacs/test/courier-test.el
;; Environment: COURIER (the binary), COURIER_TEST_BASE (the origin's base
;; URL), COURIER_TEST_DIR (a scratch directory).  Prints "ok NAME" or
;; "FAIL NAME -- detail" per check, then exits 0 when every check passed.

;;; Code:

(require 'courier)

(defconst courier-test-wait 15 "Seconds any single wait may take.")
(defvar courier-test-failures 0)
(defvar courier-test-base (or (getenv "COURIER_TEST_BASE") (error "COURIER_TEST_BASE not set")))
(defvar courier-test-dir (or (getenv "COURIER_TEST_DIR") (error "COURIER_TEST_DIR not set")))

(defun courier-test-print (string)
  "Print STRING and a newline on stdout."
  (princ (concat string "\n")))

(defun courier-test-check (name ok &optional detail)
  "Report the check NAME, passed when OK; DETAIL explains a failure."
  (if ok
      (courier-test-print (format "ok %s" name))
    (setq courier-test-failures (1+ courier-test-failures))
    (courier-test-print
     (replace-regexp-in-string
      "\n" " " (format "FAIL %s -- %S" name detail)))))

(defmacro courier-test-wait-for (&rest condition)
  "Wait, bounded, until CONDITION holds; return its value."
  `(courier-wait (lambda () ,@condition) courier-test-wait))

(defun courier-test-mode-line (buffer)
  "What `courier-mode-line-mode' puts into BUFFER's mode line, as text.
`format-mode-line' gives \"\" in batch mode, so the entry that the
mode adds to `global-mode-string' is evaluated here as the mode line
would: its :eval form, then %-escapes."
  (with-current-buffer buffer
    (let ((entry (car (member '(:eval (courier-mode-line)) global-mode-string))))
      (if entry
          (string-replace "%%" "%" (eval (cadr entry) t))
        ""))))

(defun courier-test-cannot-run ()
  "Check what courier.el says when courier cannot run."
  (let* ((url (concat courier-test-base "/bytes/1"))
         (missing (expand-file-name "no/courier" courier-test-dir))
         (plain (expand-file-name "plain-courier" courier-test-dir))
         (script (expand-file-name "exits-early" courier-test-dir))
         (refusal (lambda (program)
                    (let ((courier-program program))
                      (condition-case err
                          (progn (courier-download url #'ignore) nil)
                        (user-error (error-message-string err)))))))
    ;; a path that does not exist, a file that is not executable
    (let ((said (funcall refusal missing)))
      (courier-test-check
       "cannot run names the binary"
       (and said (string-search missing said) (string-search "no such file" said)
            (string-search "`courier-program'" said) (string-search "$COURIER" said))
       said))
    (write-region "" nil plain)
    (set-file-modes plain #o644)
    (let ((said (funcall refusal plain)))
      (courier-test-check
       "cannot run a file that is not executable"
       (and said (string-search plain said) (string-search "not executable" said))
       said))
    ;; a program that exits once it has read the first two requests
    (write-region "#!/bin/sh\nread a; read b; read c\nexit 3\n" nil script)
    (set-file-modes script #o755)
    (let ((courier-program script)
          lost)
      (courier-download url (lambda (outcome _job) (setq lost outcome)))
      (courier-test-check
       "exit at once names the binary"
       (and (courier-test-wait-for lost)
            (equal (courier-outcome-error-code lost) "exited")
            (string-search script (plist-get (plist-get lost :error) :message))
            (string-search "status 3" (plist-get (plist-get lost :error) :message)))
       lost))))

(defun courier-test-file-names ()
  "Check the file names URLs give."
  (let ((names (mapcar #'courier-url-file-name
                       '("http://h/a/my%20file.txt" "http://h/caf%C3%A9.txt?x=1#f" "http://h/dir/"
                         "http://h" "http://h/a%2Fb" "http://h/%2e%2e" "http://h/x%00y%0A"))))
    (courier-test-check
     "file names from URLs"
     (equal names '("my file.txt" "café.txt" "index.html" "index.html" "a_b" "index.html" "x_y_"))
     names)))

(defun courier-test-destinations (base)
  "Check where `courier-download-file' and relative destinations save, under BASE."
  (let* ((url (concat base "/bytes/3000?x=1"))
         (saved (expand-file-name "asked/3000"))
         asked)
    ;; asked interactively: the URL's name is offered; a directory gets it
    (let ((read-file-name-function (lambda (&rest args) (setq asked args) "asked/")))
      (cl-letf (((symbol-function 'read-string) (lambda (&rest _) url)))
        (call-interactively #'courier-download-file)))
    (courier-test-check
     "command asks for a destination"
     (and (courier-test-wait-for (file-exists-p saved))
          (equal (car asked) "Save to: ")
          (equal (nth 4 asked) "3000")
          (= (file-attribute-size (file-attributes saved)) 3000))
     (list asked saved))
    ;; a relative :destination is taken from `default-directory'
    (let (relative)
      (courier-download (concat base "/bytes/30") (lambda (o _) (setq relative o))
                        :destination "rel/thirty.bin")
      (courier-test-check
       "relative destination"
       (and (courier-test-wait-for relative)
            (courier-outcome-ok-p relative)
            (equal (plist-get relative :path) (expand-file-name "rel/thirty.bin")))
       relative))))

(defun courier-test-run ()
  "Run every check."
  (courier-test-file-names)
  (courier-test-cannot-run)
  (setq courier-arguments (list "--cache-dir" (expand-file-name "cache" courier-test-dir)
                                "--retry-delay" "1")
        courier-initialize-options '(:activationDelay 0 :completionDelay 0.05)
        courier-indicator-text " [courier]")
  (courier-mode-line-mode 1)
  (courier-test-check
   "mode line entry"
   (and (member '(:eval (courier-mode-line)) global-mode-string)
        (memq 'global-mode-string (flatten-tree mode-line-misc-info))
        (memq 'mode-line-misc-info (flatten-tree (default-value 'mode-line-format))))
   global-mode-string)
  (let ((buffer (get-buffer-create "courier-test"))
        (indicator-events nil)
        (mode-lines nil)
        init)
    (set-buffer buffer)
    (add-hook 'courier-indicator-functions
              (lambda (visible count)
                (push (list visible count) indicator-events)
                (push (courier-test-mode-line buffer) mode-lines)))
    (add-hook 'courier-progress-functions
              (lambda (buf _progress) (push (courier-test-mode-line buf) mode-lines)))

    (courier-test-print (format "courier.el loaded from %s"
                                (file-name-nondirectory (symbol-file 'courier-download))))
    ;; initialize
    (courier-start (lambda (result error) (setq init (list :result result :error error))))
    (courier-test-check
     "initialize"
     (and (courier-test-wait-for init)
          (null (plist-get init :error))
          (equal (plist-get (plist-get (plist-get init :result) :serverInfo) :name) "courier")
          (eql (plist-get (plist-get (plist-get init :result) :config) :activationDelay) 0.0))
     init)

    ;; a text download
    (let (text)
      (courier-download (concat courier-test-base "/text")
                        (lambda (outcome _job) (setq text outcome))
                        :body "text")
      (courier-test-check
       "download text"
       (and (courier-test-wait-for text)
            (courier-outcome-ok-p text)
            (equal (plist-get text :status) 200)
            (equal (plist-get text :text) "Grüße, café — naïve ✓"))
       text))

    ;; several downloads at once, one of them to a destination file
    (let* ((destination (expand-file-name "out/bytes.bin" courier-test-dir))
           (outcomes (make-vector 3 nil))
           (jobs (list
                  (courier-download (concat courier-test-base "/bytes/2048")
                                    (lambda (o _) (aset outcomes 0 o))
                                    :destination destination)
                  (courier-download (concat courier-test-base "/bytes/10")
                                    (lambda (o _) (aset outcomes 1 o))
                                    :body "base64")
                  (courier-download (concat courier-test-base "/bytes/777")
                                    (lambda (o _) (aset outcomes 2 o)))))
           (all (courier-test-wait-for (cl-every #'identity outcomes))))
      (courier-test-check
       "download many"
       (and all (cl-every #'courier-outcome-ok-p outcomes)
            (equal (plist-get (aref outcomes 2) :size) 777)
            (courier-job-receipt (nth 2 jobs))
            (courier-job-finished (nth 2 jobs)))
       outcomes)
      (courier-test-check
       "download destination"
       (and all (file-exists-p destination)
            (= (file-attribute-size (file-attributes destination)) 2048)
            (equal (plist-get (aref outcomes 0) :path) destination))
       (aref outcomes 0)))

    ;; an outcome error: HTTP 404
    (let (missing)
      (courier-download (concat courier-test-base "/status/404")
                        (lambda (o _) (setq missing o)))
      (courier-test-check
       "error http_status"
       (and (courier-test-wait-for missing)
            (not (courier-outcome-ok-p missing))
            (equal (courier-outcome-error-code missing) "http_status")
            (equal (plist-get (plist-get missing :error) :httpStatus) 404))
       missing))

    ;; JSON-RPC errors: an unknown receipt, and params courier refuses
    (let (unknown refused)
      (courier-cancel "r999999" (lambda (result error)
                                  (setq unknown (list :result result :error error))))
      (courier-test-check
       "error unknown receipt"
       (and (courier-test-wait-for unknown)
            (equal (plist-get (plist-get unknown :error) :code) -32001))
       unknown)
      (courier-download "not a url" (lambda (o _) (setq refused o)))
      (courier-test-check
       "error invalid params"
       (and (courier-test-wait-for refused)
            (not (courier-outcome-ok-p refused))
            (equal (courier-outcome-error-code refused) "rpc")
            (equal (plist-get (plist-get (plist-get refused :error) :rpc) :code) -32602))
       refused))

    ;; cancel a download that hangs, after asking its progress
    (let* (stalled progress answer
           (job (courier-download (concat courier-test-base "/stall?after=100")
                                  (lambda (o _) (setq stalled o)))))
      (courier-test-wait-for
       (or stalled
           (let ((p (courier-job-progress job)))
             (and p (>= (plist-get p :received) 100)))))
      (courier-progress job (lambda (result error)
                              (setq progress (list :result result :error error))))
      (courier-test-check
       "progress query"
       (and (courier-test-wait-for progress)
            (null (plist-get progress :error))
            (let ((result (plist-get progress :result)))
              (and (equal (plist-get result :receipt) (courier-job-receipt job))
                   (equal (plist-get result :state) "running")
                   (equal (plist-get result :received) 100))))
       progress)
      (courier-cancel job (lambda (result error)
                            (setq answer (list :result result :error error))))
      (courier-test-check
       "cancel"
       (and (courier-test-wait-for (and stalled answer))
            (eq (plist-get (plist-get answer :result) :cancelled) t)
            (not (courier-outcome-ok-p stalled))
            (equal (courier-outcome-error-code stalled) "cancelled"))
       (list answer stalled)))

    ;; cancel before courier answered with a receipt
    (let* (early
           (job (courier-download (concat courier-test-base "/stall?after=10")
                                  (lambda (o _) (setq early o))))
           (had-receipt (courier-job-receipt job)))
      (courier-cancel job)
      (courier-test-check
       "cancel before receipt"
       (and (not had-receipt)
            (courier-test-wait-for early)
            (equal (courier-outcome-error-code early) "cancelled"))
       early))

    ;; progress notifications, the progress bound to a buffer, the indicator
    (courier-test-wait-for (not courier-indicator-visible))
    (setq indicator-events nil mode-lines nil)
    (let (dripped progress-events)
      (courier-download (concat courier-test-base "/drip?size=40000&chunks=8&interval=0.05")
                        (lambda (o _) (setq dripped o))
                        :buffer buffer
                        :on-progress (lambda (p _) (push p progress-events)))
      (courier-test-check
       "download drip"
       (and (courier-test-wait-for dripped)
            (courier-outcome-ok-p dripped)
            (equal (plist-get dripped :size) 40000))
       dripped)
      (setq progress-events (nreverse progress-events))
      (let ((received (mapcar (lambda (p) (plist-get p :received)) progress-events)))
        (courier-test-check
         "progress notifications"
         (and (>= (length received) 2)
              (equal received (sort (copy-sequence received) #'<=))
              (equal (car (last received)) 40000)
              (equal (plist-get (car (last progress-events)) :fraction) 1.0))
         progress-events))
      (courier-test-check
       "buffer progress in mode line"
       (cl-some (lambda (line) (string-match-p "[0-9]+%" line)) mode-lines)
       mode-lines)
      (courier-test-check
       "buffer progress cleared"
       (and (null (buffer-local-value 'courier-buffer-progress buffer))
            (not (string-match-p "[0-9]+%" (courier-test-mode-line buffer))))
       (buffer-local-value 'courier-buffer-progress buffer))
      (courier-test-wait-for (and (>= (length indicator-events) 2)
                                  (not (car (car indicator-events)))))
      (setq indicator-events (reverse indicator-events))
      (courier-test-check
       "indicator shown"
       (and indicator-events
            (eq (car (car indicator-events)) t)
            (>= (cadr (car indicator-events)) 1))
       indicator-events)
      (courier-test-check
       "indicator in mode line"
       (cl-some (lambda (line) (string-search "[courier]" line)) mode-lines)
       mode-lines)
      (let ((final (car (last indicator-events))))
        (courier-test-check
         "indicator hidden"
         (and final (null (car final)) (equal (cadr final) 0)
              (not courier-indicator-visible)
              (not (string-search "[courier]" (courier-test-mode-line buffer))))
         indicator-events)))

    ;; a download waiting to be retried: " retry 1" in its buffer's mode
    ;; line, " retrying" elsewhere; both gone once it has finished
    (let (retried events lines)
      (add-hook 'courier-retrying-functions
                (lambda (_job params)
                  (push params events)
                  (push (cons (courier-test-mode-line buffer)
                              (with-temp-buffer (courier-mode-line)))
                        lines)))
      (courier-download (concat courier-test-base "/flaky/emacs-retry?statuses=503,200&size=300")
                        (lambda (o _) (setq retried o))
                        :buffer buffer)
      (courier-test-check
       "retry in mode line"
       (and (courier-test-wait-for retried)
            (courier-outcome-ok-p retried)
            (equal (plist-get retried :attempts) 2)
            (= (length events) 1)
            (equal (plist-get (car events) :attempt) 2)
            (equal (plist-get (plist-get (car events) :error) :code) "http_status")
            (string-search "retry 1" (car (car lines)))
            (string-match-p " retrying\\'" (cdr (car lines))))
       (list retried events lines))
      (courier-test-check
       "retry cleared"
       (and (null (buffer-local-value 'courier-buffer-retry buffer))
            (= courier-retrying-count 0)
            (not (string-search "retry" (courier-test-mode-line buffer))))
       (list (buffer-local-value 'courier-buffer-retry buffer) courier-retrying-count)))

    (courier-test-destinations courier-test-base)

    ;; a download sent with `courier-request' leaves nothing behind once finished
    (let* (raw
           (hook (lambda (method params)
                   (when (equal method "download/finished") (setq raw params)))))
      (add-hook 'courier-notification-functions hook)
      (courier-request 'download (list :url (concat courier-test-base "/bytes/8") :wait t))
      (courier-test-check
       "raw download leaves nothing"
       (and (courier-test-wait-for raw)
            (zerop (hash-table-count courier--early))
            (zerop (hash-table-count courier--jobs)))
       (hash-table-count courier--early))
      (remove-hook 'courier-notification-functions hook))

    ;; courier is shut down when Emacs exits: this runs after courier's own hook
    (courier-test-print
     (format "courier pid %s" (process-id (jsonrpc--process courier--connection))))
    (add-hook 'kill-emacs-hook
              (lambda ()
                (courier-test-print (format "courier exit status %s" courier-exit-status)))
              t)))

(condition-case err
    (courier-test-run)
  (error (courier-test-check "script" nil err)))
(courier-test-print (if (zerop courier-test-failures)
                        "all checks passed"
                      (format "%d check(s) failed" courier-test-failures)))
(kill-emacs (if (zerop courier-test-failures) 0 1))

;;; courier-test.el ends here
