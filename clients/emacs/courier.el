;;; courier.el --- Downloads through courier, over JSON-RPC  -*- lexical-binding: t; -*-

;; Version: 1.0
;; Package-Requires: ((emacs "28.1"))
;; Keywords: comm, processes

;;; Commentary:

;; courier is a download helper that a program spawns and drives with
;; JSON-RPC 2.0 over stdin/stdout.  This package runs it with Emacs's
;; built-in `jsonrpc' library (Content-Length framing):
;;
;;   (courier-download "https://example.org/f.tar.gz"
;;                     (lambda (outcome _job)
;;                       (if (courier-outcome-ok-p outcome)
;;                           (message "saved %s" (plist-get outcome :path))
;;                         (message "failed: %s" (courier-outcome-error-code outcome))))
;;                     :destination "/tmp/f.tar.gz"
;;                     :buffer (current-buffer))
;;
;; `courier-cancel' cancels, `courier-progress' asks for progress, and
;; `courier-mode-line-mode' shows courier's activity indicator, the
;; progress of the download bound to each buffer, and downloads waiting
;; to be retried in the mode line.
;; courier is shut down (`shutdown', then `exit') when Emacs exits.

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'url-parse)
(require 'url-util)

(defgroup courier nil
  "Downloads through the courier helper process."
  :group 'comm
  :prefix "courier-")

(defcustom courier-program nil
  "The courier executable.
nil means the value of the environment variable COURIER, else
\"courier\" on `exec-path'."
  :type '(choice (const :tag "$COURIER or courier" nil) file))

(defcustom courier-arguments nil
  "Command line arguments for courier, e.g. (\"--max-active\" \"8\")."
  :type '(repeat string))

(defcustom courier-initialize-options nil
  "The `options' of `initialize', a plist of courier's Config names.
For example (:activationDelay 0.5 :maxActive 8)."
  :type 'plist)

(defcustom courier-indicator-text " courier"
  "What the mode line shows while courier's activity indicator is visible."
  :type 'string)

(defcustom courier-retrying-text " retrying"
  "What the mode line shows while downloads wait to be retried.
Not shown in a buffer whose own download waits: that one shows
\" retry N\".  Followed by the count when several wait."
  :type 'string)

(defcustom courier-shutdown-timeout 3
  "Seconds to wait for courier to answer `shutdown' and to exit."
  :type 'number)

(defcustom courier-events-buffer-size 0
  "Size of the jsonrpc events buffer: 0 logs nothing, nil everything."
  :type '(choice (const :tag "Unlimited" nil) integer))

(defvar courier-indicator-functions nil
  "Functions called with VISIBLE and ACTIVITY-COUNT on indicator changes.")

(defvar courier-progress-functions nil
  "Functions called with BUFFER and PROGRESS when a bound buffer progresses.
PROGRESS is the plist of the `view/progress' notification.")

(defvar courier-retrying-functions nil
  "Functions called with JOB and PARAMS when JOB's download waits to be retried.
PARAMS is the plist of the `download/retrying' notification (:attempt,
:delay, :error ...).")

(defvar courier-notification-functions nil
  "Functions called with METHOD (a string) and PARAMS on every notification.")

(defvar courier-indicator-visible nil
  "Non-nil while courier's activity indicator is visible.")

(defvar courier-activity-count 0
  "The activity count of courier's last `indicator/visibility'.")

(defvar courier-exit-status nil
  "The exit status of the last courier process that ended.")

(defvar courier-initialize-result nil
  "The result of `initialize' for the running courier.")

(defvar-local courier-buffer-progress nil
  "Progress of the download bound to this buffer.
A plist (:fraction :received :expected); :fraction is nil while the
size is unknown.")

(defvar-local courier-buffer-retry nil
  "While the download bound to this buffer waits to be retried, a plist.
\(:attempt :delay :code): the attempt to come, the seconds it waits,
and the error code of the attempt that failed.")

(defvar courier-retrying-count 0
  "How many receipts wait to be retried.")

(defvar-local courier--buffer-receipt nil
  "The receipt whose progress this buffer shows.")

(defvar courier--connection nil)
(defvar courier--jobs (make-hash-table :test #'equal)
  "Receipt -> list of the jobs that hold it.")
(defvar courier--early (make-hash-table :test #'equal)
  "Receipt -> `download/finished' params that came before the receipt.
Kept while a `courier-download' awaits courier's answer.")
(defvar courier--awaiting 0
  "How many `courier-download' requests await courier's answer.")
(defvar courier--retrying (make-hash-table :test #'equal)
  "Receipt -> `download/retrying' params while it waits.")
(defvar courier--views (make-hash-table :test #'equal)
  "View name -> buffer.")
(defvar courier--view-counter 0)

(cl-defstruct (courier-job (:constructor courier--make-job)
                           (:copier nil))
  "A download started by `courier-download'."
  url receipt task reused finished outcome callback on-progress buffer
  progress cancel-requested cancel-callback)

;;;; Outcomes

(defun courier-outcome-ok-p (outcome)
  "Non-nil when OUTCOME is a success."
  (eq (plist-get outcome :ok) t))

(defun courier-outcome-error-code (outcome)
  "The error code of OUTCOME (a string), or nil."
  (plist-get (plist-get outcome :error) :code))

;;;; Jobs

(defun courier--release-buffer (job)
  "Stop showing JOB's progress in its buffer."
  (let ((buffer (courier-job-buffer job)))
    (when (buffer-live-p buffer)
      (with-current-buffer buffer
        (when (or (null courier--buffer-receipt)
                  (equal courier--buffer-receipt (courier-job-receipt job)))
          (setq courier-buffer-progress nil
                courier-buffer-retry nil
                courier--buffer-receipt nil)
          (force-mode-line-update))))))

(defun courier--safe-call (function &rest args)
  "Call FUNCTION with ARGS, reporting its errors instead of raising them."
  (when function
    (condition-case err
        (apply function args)
      (error (message "courier: %s" (error-message-string err))))))

(defun courier--finish (job outcome)
  "End JOB with OUTCOME and call its callback."
  (unless (courier-job-finished job)
    (setf (courier-job-finished job) t
          (courier-job-outcome job) outcome)
    (courier--release-buffer job)
    (courier--safe-call (courier-job-callback job) outcome job)))

(defun courier--set-retrying (receipt params)
  "Record that RECEIPT waits to be retried (PARAMS), or not (nil).
For its jobs' buffers and `courier-retrying-count'."
  (when (or params (gethash receipt courier--retrying))
    (if params
        (puthash receipt params courier--retrying)
      (remhash receipt courier--retrying))
    (setq courier-retrying-count (hash-table-count courier--retrying))
    (dolist (job (gethash receipt courier--jobs))
      (let ((buffer (courier-job-buffer job)))
        (when (buffer-live-p buffer)
          (with-current-buffer buffer
            (when (equal courier--buffer-receipt receipt)
              (setq courier-buffer-retry
                    (and params
                         (list :attempt (plist-get params :attempt)
                               :delay (plist-get params :delay)
                               :code (plist-get (plist-get params :error) :code)))))))))
    (force-mode-line-update t)))

(defun courier--finish-receipt (receipt outcome)
  "End every job that holds RECEIPT with OUTCOME."
  (courier--set-retrying receipt nil)
  (let ((jobs (gethash receipt courier--jobs)))
    (remhash receipt courier--jobs)
    (dolist (job jobs)
      (courier--finish job outcome))))

(defun courier--fail-unfinished (code message)
  "End every unfinished job with error CODE and MESSAGE."
  (let (receipts)
    (maphash (lambda (receipt _jobs) (push receipt receipts)) courier--jobs)
    (dolist (receipt receipts)
      (courier--finish-receipt
       receipt (list :ok :json-false :error (list :code code :message message))))))

;;;; Notifications

(defun courier--on-indicator (params)
  "Handle `indicator/visibility' PARAMS."
  (setq courier-indicator-visible (eq (plist-get params :visible) t)
        courier-activity-count (or (plist-get params :activityCount) 0))
  (force-mode-line-update t)
  (run-hook-with-args 'courier-indicator-functions
                      courier-indicator-visible courier-activity-count))

(defun courier--on-view-progress (params)
  "Handle `view/progress' PARAMS."
  (let ((buffer (gethash (plist-get params :view) courier--views)))
    (when (buffer-live-p buffer)
      (with-current-buffer buffer
        (setq courier-buffer-progress
              (list :fraction (plist-get params :fraction)
                    :received (or (plist-get params :received) 0)
                    :expected (plist-get params :expected)))
        (force-mode-line-update))
      (run-hook-with-args 'courier-progress-functions buffer params))))

(defun courier--on-notification (_connection method params)
  "Dispatch the notification METHOD with PARAMS."
  (pcase method
    ('download/finished
     (let ((receipt (plist-get params :receipt)))
       (cond ((gethash receipt courier--jobs)
              (courier--finish-receipt receipt (plist-get params :outcome)))
             ((> courier--awaiting 0)
              (puthash receipt params courier--early)))))
    ('download/retrying
     (mapc (lambda (receipt)
             (courier--set-retrying receipt params)
             (dolist (job (gethash receipt courier--jobs))
               (run-hook-with-args 'courier-retrying-functions job params)))
           (plist-get params :receipts)))
    ('download/progress
     (mapc (lambda (receipt)
             (courier--set-retrying receipt nil)
             (dolist (job (gethash receipt courier--jobs))
               (setf (courier-job-progress job) params)
               (courier--safe-call (courier-job-on-progress job) params job)))
           (plist-get params :receipts)))
    ('indicator/visibility (courier--on-indicator params))
    ('view/progress (courier--on-view-progress params)))
  (run-hook-with-args 'courier-notification-functions
                      (symbol-name method) params))

;;;; Process

(defun courier--executable ()
  "The courier executable to run, and the setting that chose it."
  (let ((env (getenv "COURIER")))
    (cond (courier-program (list courier-program "`courier-program'"))
          ((and env (not (equal env ""))) (list env "$COURIER"))
          (t (list "courier" "the default")))))

(defun courier--cannot-run (program source)
  "Why PROGRAM, chosen by SOURCE, cannot run: a message for the user."
  (format "Cannot run %s: %s (from %s; set `courier-program' or $COURIER)"
          program
          (cond ((not (file-name-directory program)) "not found on `exec-path'")
                ((file-exists-p program) "not executable")
                (t "no such file"))
          source))

(defun courier--exit-message (connection)
  "What to tell about CONNECTION's courier having ended."
  (let ((process (jsonrpc--process connection)))
    (format "courier %s exited with status %s"
            (car (process-command process)) (process-exit-status process))))

(defun courier--on-exit (connection)
  "Record that CONNECTION's courier ended; fail what it left unfinished."
  (setq courier-exit-status
        (process-exit-status (jsonrpc--process connection)))
  (when (eq courier--connection connection)
    (setq courier--connection nil
          courier-indicator-visible nil
          courier-activity-count 0)
    (force-mode-line-update t))
  (courier--fail-unfinished "exited" (courier--exit-message connection)))

(defun courier-running-p ()
  "Non-nil while a courier process runs."
  (and courier--connection (jsonrpc-running-p courier--connection)))

(defun courier-start (&optional on-ready)
  "Start courier unless it runs, and send `initialize'.
ON-READY, when given, is called with the result and the error of
`initialize'.  Every other command starts courier when needed."
  (if (courier-running-p)
      (when on-ready
        (funcall on-ready courier-initialize-result nil))
    (pcase-let* ((`(,program ,source) (courier--executable))
                 (path (executable-find program)))
      (unless path
        (user-error "%s" (courier--cannot-run program source)))
      (setq courier-initialize-result nil)
      (setq courier--connection
            (jsonrpc-process-connection
             :name "courier"
             :events-buffer-scrollback-size courier-events-buffer-size
             :notification-dispatcher #'courier--on-notification
             :on-shutdown #'courier--on-exit
             :process (lambda ()
                        (make-process
                         :name "courier"
                         :command (cons path courier-arguments)
                         :connection-type 'pipe
                         :coding 'utf-8-emacs-unix
                         :noquery t
                         :stderr (get-buffer-create "*courier stderr*")))))
      (add-hook 'kill-emacs-hook #'courier-stop)
      (courier-request
       'initialize
       `(:clientInfo (:name "courier.el" :version ,emacs-version)
                     ,@(and courier-initialize-options
                            (list :options courier-initialize-options)))
       (lambda (result error)
         (setq courier-initialize-result result)
         (when error
           (message "courier: initialize failed: %s" (plist-get error :message)))
         (when on-ready
           (funcall on-ready result error))))))
  courier--connection)

(defun courier-request (method params &optional callback timeout)
  "Send the request METHOD (a string or symbol) with PARAMS (a plist).
CALLBACK is called with the result and nil, or nil and the error
plist (:code :message :data).  TIMEOUT in seconds (nil: none)."
  (unless (courier-running-p)
    (courier-start))
  (let ((callback (or callback #'ignore)))
    (jsonrpc-async-request
     courier--connection
     (if (symbolp method) method (intern method))
     params
     :success-fn (lambda (result) (funcall callback result nil))
     :error-fn (lambda (error) (funcall callback nil error))
     :timeout-fn (lambda ()
                   (funcall callback nil
                            (list :code -1 :message "no answer in time")))
     :timeout timeout)))

(defun courier-notify (method params)
  "Send the notification METHOD (a string or symbol) with PARAMS."
  (when (courier-running-p)
    (jsonrpc-notify courier--connection
                    (if (symbolp method) method (intern method))
                    params)))

(defun courier-wait (predicate seconds)
  "Process courier's output until PREDICATE holds, for at most SECONDS.
Return PREDICATE's last value."
  (let ((deadline (+ (float-time) seconds))
        value)
    (while (and (not (setq value (funcall predicate)))
                (< (float-time) deadline))
      (accept-process-output nil 0.02))
    value))

(defun courier-stop (&optional timeout)
  "Shut courier down: `shutdown', then `exit'; wait up to TIMEOUT seconds.
Runs by itself when Emacs exits.  Return courier's exit status."
  (let ((connection courier--connection)
        (timeout (or timeout courier-shutdown-timeout)))
    (when (and connection (jsonrpc-running-p connection))
      (let ((answered nil))
        (jsonrpc-async-request connection 'shutdown nil
                               :success-fn (lambda (_) (setq answered t))
                               :error-fn (lambda (_) (setq answered t))
                               :timeout-fn #'ignore
                               :timeout timeout)
        (courier-wait (lambda () (or answered
                                     (not (jsonrpc-running-p connection))))
                      timeout)
        (when (jsonrpc-running-p connection)
          (jsonrpc-notify connection 'exit nil))
        (courier-wait (lambda () (not (jsonrpc-running-p connection)))
                      timeout)
        (jsonrpc-shutdown connection)))
    courier-exit-status))

;;;; Downloads

(defun courier--bind-buffer (job)
  "Show JOB's progress in its buffer's mode line."
  (let ((buffer (courier-job-buffer job))
        (receipt (courier-job-receipt job)))
    (when (buffer-live-p buffer)
      (let ((view (format "emacs-buffer-%d" (cl-incf courier--view-counter))))
        (puthash view buffer courier--views)
        (with-current-buffer buffer
          (setq courier--buffer-receipt receipt
                courier-buffer-progress (list :fraction nil :received 0 :expected nil))
          (force-mode-line-update))
        (courier-request
         'bind (list :view view :receipt receipt :kind "progress")
         (lambda (_result error)
           (when (and error (buffer-live-p buffer))
             (with-current-buffer buffer
               (when (equal courier--buffer-receipt receipt)
                 (setq courier-buffer-progress nil))))))))))

(defun courier--on-receipt (job result)
  "Record the `download' RESULT for JOB."
  (let ((receipt (plist-get result :receipt)))
    (setf (courier-job-receipt job) receipt
          (courier-job-task job) (plist-get result :task)
          (courier-job-reused job) (eq (plist-get result :reused) t))
    (puthash receipt (append (gethash receipt courier--jobs) (list job))
             courier--jobs)
    (when (courier-job-buffer job)
      (courier--bind-buffer job))
    (let ((early (gethash receipt courier--early)))
      (cond
       (early
        (remhash receipt courier--early)
        (courier--finish-receipt receipt (plist-get early :outcome)))
       ((courier-job-cancel-requested job)
        (courier-cancel job (courier-job-cancel-callback job)))))))

(defun courier-download (url callback &rest params)
  "Download URL; call CALLBACK with the outcome and the job when it ends.
PARAMS is a plist of `download' params (:body, :destination,
:headers, :slot, :priority, :accept (a vector), :maxBytes, :timeout,
...) and of:
  :buffer       a buffer whose mode line shows the progress
  :on-progress  a function of PROGRESS and JOB for `download/progress'
A relative :destination is taken from `default-directory' (an
absolute one is sent as it is).
The outcome is courier's plist (:ok, :status, :path, :text, :error
...).  A download courier refused ends with error code \"rpc\" (:rpc
holds the JSON-RPC error); one lost because courier ended, \"exited\".
Return the job (a `courier-job'); its receipt is set once courier
has answered.  When courier cannot run, signal a `user-error' that
names it and the settings that choose it."
  (let ((job (courier--make-job :url url :callback callback
                                :on-progress (plist-get params :on-progress)
                                :buffer (plist-get params :buffer)))
        (request (list :url url)))
    (cl-loop for (key value) on params by #'cddr
             unless (memq key '(:buffer :on-progress))
             do (setq request
                      (append request
                              (list key (if (and (eq key :destination) (stringp value)
                                                 (not (equal value ""))
                                                 (not (string-prefix-p "/" value)))
                                            (expand-file-name value)
                                          value)))))
    (courier-request
     'download request
     (lambda (result error)
       (setq courier--awaiting (max 0 (1- courier--awaiting)))
       (let ((connection courier--connection))
         (cond
          ((and error connection (not (jsonrpc-running-p connection)))
           (courier--finish
            job (list :ok :json-false :url url
                      :error (list :code "exited"
                                   :message (courier--exit-message connection)))))
          (error
           (courier--finish
            job (list :ok :json-false :url url
                      :error (list :code "rpc" :message (plist-get error :message)
                                   :rpc error))))
          (t (courier--on-receipt job result))))
       ;; What no job claimed by now belongs to downloads sent another way.
       (when (zerop courier--awaiting)
         (clrhash courier--early))))
    (cl-incf courier--awaiting)
    job))

(defun courier-cancel (target &optional callback)
  "Cancel TARGET: a `courier-job', a receipt, or a plist (:slot S) or (:all t).
CALLBACK gets courier's result ((:cancelled :count)) and error."
  (let ((callback (or callback #'ignore)))
    (cond
     ((stringp target)
      (courier-request 'cancel (list :receipt target) callback))
     ((courier-job-p target)
      (cond
       ((courier-job-finished target)
        (funcall callback (list :cancelled :json-false :count 0) nil))
       ((null (courier-job-receipt target))
        (setf (courier-job-cancel-requested target) t
              (courier-job-cancel-callback target) callback))
       (t (courier-request 'cancel (list :receipt (courier-job-receipt target))
                           callback))))
     (t (courier-request 'cancel target callback)))))

(defun courier-progress (target callback)
  "Ask for the progress of TARGET (a job or a receipt; nil: every task).
CALLBACK gets the result and the error."
  (courier-request
   'progress
   (cond ((stringp target) (list :receipt target))
         ((courier-job-p target) (list :receipt (courier-job-receipt target))))
   callback))

(defun courier-url-file-name (url)
  "The name a file downloaded from URL gets.
The last segment of URL's path, percent-decoded, with /, \\, NUL
and control characters made _; \"index.html\" when that leaves
nothing, \".\" or \"..\"."
  (let* ((path (car (url-path-and-query (url-generic-parse-url url))))
         (segment (if path (file-name-nondirectory path) ""))
         (name (replace-regexp-in-string
                "[/\\\177[:cntrl:]]" "_"
                (decode-coding-string (url-unhex-string segment t) 'utf-8) t t)))
    (if (member name '("" "." "..")) "index.html" name)))

(defun courier-download-file (url file)
  "Download URL to FILE, showing the progress in this buffer's mode line.
FILE may be a directory: the file then gets URL's file name.
Interactively, offer that name in `default-directory'."
  (interactive
   (let ((url (read-string "URL: ")))
     (list url (read-file-name "Save to: " nil nil nil (courier-url-file-name url)))))
  (let ((destination (expand-file-name file)))
    (when (or (file-directory-p destination) (directory-name-p destination))
      (setq destination (expand-file-name (courier-url-file-name url)
                                          (file-name-as-directory destination))))
    (courier-download
     url
     (lambda (outcome _job)
       (if (courier-outcome-ok-p outcome)
           (message "courier: %s saved to %s" url destination)
         (message "courier: %s failed: %s%s" url (courier-outcome-error-code outcome)
                  (let ((text (plist-get (plist-get outcome :error) :message)))
                    (if text (format " (%s)" text) "")))))
     :destination destination
     :buffer (current-buffer))))

(defun courier-cancel-all ()
  "Cancel every unfinished download."
  (interactive)
  (courier-cancel '(:all t)))

;;;; Mode line

(defun courier-mode-line ()
  "The mode line text: the indicator, then this buffer's progress.
While this buffer's download waits to be retried, \" retry N\" instead
of its progress; while others wait, `courier-retrying-text'."
  (let ((progress courier-buffer-progress)
        (retry courier-buffer-retry))
    (concat
     (if courier-indicator-visible courier-indicator-text "")
     (cond (retry (format " retry %d" (1- (or (plist-get retry :attempt) 2))))
           ((> courier-retrying-count 1)
            (format "%s %d" courier-retrying-text courier-retrying-count))
           ((= courier-retrying-count 1) courier-retrying-text))
     (when (and progress (not retry))
       (let ((fraction (plist-get progress :fraction)))
         (if (numberp fraction)
             (format " %d%%%%" (floor (* 100 fraction)))
           (format " %s" (file-size-human-readable
                          (or (plist-get progress :received) 0)))))))))

(defconst courier--mode-line-entry '(:eval (courier-mode-line))
  "The entry `courier-mode-line-mode' adds to `global-mode-string'.")

;;;###autoload
(define-minor-mode courier-mode-line-mode
  "Show courier's activity indicator and download progress in the mode line."
  :global t
  :group 'courier
  (if courier-mode-line-mode
      (add-to-list 'global-mode-string courier--mode-line-entry t)
    (setq global-mode-string
          (delete courier--mode-line-entry global-mode-string)))
  (force-mode-line-update t))

(provide 'courier)
;;; courier.el ends here
